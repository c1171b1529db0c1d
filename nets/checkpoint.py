"""Orbax checkpoints of a training state, written atomically, with clear errors when unreadable.

Orbax writes each step into a temporary folder and renames it when complete, so an interrupted
save never replaces a good checkpoint. The state (any pytree, typed PRNG keys included) is stored
as a flat dict of arrays and restored onto the structure of a template state.

Orbax (0.12, OCDBT format) does not checksum array data: a flipped byte in a data file restores
silently as different weights. Every save therefore records a SHA-256 of the arrays' bytes in
``<directory>/sha256.json`` (written before orbax commits the step), and every restore recomputes
it and refuses a mismatch.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import jax
import numpy as np

HASHES = "sha256.json"


class CheckpointError(RuntimeError):
    """A checkpoint exists but cannot be read or does not fit the model."""


def _is_key(x) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def _encode(tree: Any) -> dict:
    leaves = jax.tree.leaves(tree)
    return {
        f"{i:05d}": np.asarray(jax.random.key_data(x) if _is_key(x) else x)
        for i, x in enumerate(leaves)
    }


def _decode(flat: dict, like: Any) -> Any:
    leaves, treedef = jax.tree.flatten(like)
    if len(flat) != len(leaves):
        raise CheckpointError(
            f"checkpoint holds {len(flat)} arrays but the model state has {len(leaves)}"
        )
    out = []
    for i, ref in enumerate(leaves):
        arr = flat[f"{i:05d}"]
        if _is_key(ref):
            out.append(jax.random.wrap_key_data(arr, impl=jax.random.key_impl(ref)))
            continue
        if arr.shape != ref.shape or arr.dtype != ref.dtype:
            raise CheckpointError(
                f"checkpoint array {i} has shape {arr.shape} {arr.dtype}, the model expects "
                f"{ref.shape} {ref.dtype}"
            )
        out.append(jax.numpy.asarray(arr))
    return jax.tree.unflatten(treedef, out)


def content_hash(flat: dict[str, np.ndarray]) -> str:
    """SHA-256 of a flat dict of arrays: every key, dtype, shape and byte, in key order.

    Args:
      flat: name → array (any shapes and dtypes).

    Returns:
      the hex digest (64 characters).
    """
    h = hashlib.sha256()
    for k in sorted(flat):
        a = np.ascontiguousarray(flat[k])
        h.update(f"{k}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.reshape(-1).view(np.uint8))  # the bytes of a.tobytes(), without a copy
    return h.hexdigest()


def tree_hash(tree: Any) -> str:
    """:func:`content_hash` of the leaves of a pytree (PRNG keys by their key data)."""
    return content_hash(_encode(tree))


def _read_hashes(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise CheckpointError(f"{path} is not valid JSON ({e}); delete the checkpoints") from e


def _write_text_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


@contextlib.contextmanager
def _quiet_orbax():
    """Within the block, orbax's error logs (a traceback per worker thread of one failed write)
    are held back: the failure reaches the caller once, as a :class:`CheckpointError`."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _write_failure(directory: Path, step: int, error: Exception) -> str:
    """One sentence for a checkpoint that could not be written."""
    text = str(error)
    full = "No space left on device" in text or getattr(error, "errno", None) == errno.ENOSPC
    reason = "the disk is full" if full else f"{type(error).__name__}: {text[:300]}"
    return (
        f"could not write checkpoint step {step} to {directory} ({reason}); the earlier "
        "checkpoints are kept: free space or pass another run_dir, then resume with resume=True"
    )


class Checkpointer:
    """Keeps the latest ``max_to_keep`` checkpoints of a training state under ``directory``.

    Args:
      directory: folder holding one sub-folder per saved step.
      max_to_keep: number of most recent checkpoints kept.
    """

    def __init__(self, directory: str | Path, max_to_keep: int = 2):
        import orbax.checkpoint as ocp

        self.directory = Path(directory).absolute()
        self._ocp = ocp
        # Synchronous saves: `save` waits for the write anyway, and a failed write (a full disk)
        # then raises here instead of in orbax's background threads.
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep, create=True, enable_async_checkpointing=False
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    def latest_step(self) -> int | None:
        """The newest complete checkpoint's step, or None."""
        self._manager.reload()
        return self._manager.latest_step()

    def save(self, step: int, state: Any) -> Path:
        """Save ``state`` as step ``step`` and wait until it is on disk; returns its folder."""
        flat = _encode(state)
        hashes = _read_hashes(self.directory / HASHES)
        kept = {str(s) for s in self._manager.all_steps()}
        hashes = {k: v for k, v in hashes.items() if k in kept}
        hashes[str(step)] = content_hash(flat)
        if jax.process_index() == 0:  # multi-host: one writer (orbax itself saves collectively)
            _write_text_atomic(self.directory / HASHES, json.dumps(hashes, indent=1) + "\n")
        try:
            with _quiet_orbax():
                self._manager.save(step, args=self._ocp.args.StandardSave(flat), force=True)
                self._manager.wait_until_finished()
        except Exception as e:  # orbax and tensorstore raise many types for a failed write
            # from None: one sentence, not orbax's chained worker tracebacks (kept on .original)
            err = CheckpointError(_write_failure(self.directory, step, e))
            err.original = e
            raise err from None
        return self.directory / str(step)

    def restore(self, like: Any, step: int | None = None) -> tuple[int, Any]:
        """Restore the checkpoint ``step`` (default the latest) onto the structure of ``like``.

        Returns:
          (step, state).

        Raises:
          CheckpointError: no checkpoint, an unreadable one, one whose content hash differs from
            the one recorded at save (damaged data), or one that does not fit ``like``.
        """
        step = self.latest_step() if step is None else step
        if step is None:
            raise CheckpointError(f"no checkpoint in {self.directory}")
        template = _encode(like)
        try:
            flat = self._manager.restore(step, args=self._ocp.args.StandardRestore(template))
        except Exception as e:  # orbax raises many types for damaged files
            raise CheckpointError(
                f"checkpoint {self.directory / str(step)} is unreadable ({type(e).__name__}: "
                f"{str(e)[:200]}); delete that folder to resume from an earlier checkpoint"
            ) from e
        flat = {k: np.asarray(v) for k, v in flat.items()}
        expected = _read_hashes(self.directory / HASHES).get(str(step))
        where = self.directory / str(step)
        if expected is None:
            raise CheckpointError(
                f"checkpoint {where} has no content hash in {self.directory / HASHES} (written "
                "by an older version or damaged); delete that folder to start over"
            )
        if content_hash(flat) != expected:
            raise CheckpointError(
                f"checkpoint {where} is damaged: its content hash differs from the one recorded "
                "at save; delete that folder to resume from an earlier checkpoint"
            )
        return step, _decode(flat, like)

    def close(self) -> None:
        """Finish pending writes and release the manager."""
        self._manager.close()
