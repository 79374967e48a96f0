"""Batches to the accelerator: pinned staging and side-stream copies.

A batch is a tuple (the default schema's images and labels) or a dict of
tensors (a schema of named fields); both are staged the same way, tensor by
tensor. Pinned buffers are kept per tensor and used alternately, so a batch's
staging is reused only after its copy to the device is done.
"""
import time


def leaves(batch):
    """The batch's tensors, in order."""
    return list(batch.values()) if isinstance(batch, dict) else list(batch)


def rebuild(batch, tensors):
    """A batch of the same kind (dict keys or tuple) holding `tensors`."""
    if isinstance(batch, dict):
        return dict(zip(batch.keys(), tensors))
    return tuple(tensors)


class Stager:
    """Copies CPU batches into pinned memory and, with a CUDA device, starts
    their copies on a side stream one batch ahead of the consumer."""

    def __init__(self, torch, device, loader):
        self._torch = torch
        self._device = device          # a CUDA device, or None for pinning only
        self._loader = loader          # for its _h2d_ns / _h2d_bytes counters
        self._staging = [None, None]   # per turn: the pinned tensors
        self._events = [None, None]    # per turn: its last copy to the device
        self._turn = 0
        self._stream = torch.cuda.Stream(device=device) if device is not None else None

    def pinned(self, batch):
        """(the batch in pinned memory, its turn); the buffers are reused two batches later."""
        t0 = time.monotonic_ns()
        try:
            torch = self._torch
            k = self._turn
            self._turn ^= 1
            if self._events[k] is not None:
                self._events[k].synchronize()  # its last copy to the device is done
            xs = leaves(batch)
            buf = self._staging[k]
            if buf is None or len(buf) != len(xs) or any(b.shape != x.shape or b.dtype != x.dtype
                                                        for b, x in zip(buf, xs)):
                buf = [torch.empty(x.shape, dtype=x.dtype, pin_memory=True) for x in xs]
                self._staging[k] = buf
            for b, x in zip(buf, xs):
                b.copy_(x)
            return rebuild(batch, buf), k
        finally:  # host-to-device cost on the consumer's thread, for stats() and stoker doctor
            self._loader._h2d_ns += time.monotonic_ns() - t0
            self._loader._h2d_bytes += sum(x.numel() * x.element_size() for x in leaves(batch))

    def start(self, batch):
        """Starts the batch's copy to the device on the side stream: (device batch, event)."""
        torch = self._torch
        staged, k = self.pinned(batch)
        t0 = time.monotonic_ns()
        with torch.cuda.stream(self._stream):
            moved = [x.to(self._device, non_blocking=True) for x in leaves(staged)]
            event = torch.cuda.Event()
            event.record(self._stream)
        self._events[k] = event
        self._loader._h2d_ns += time.monotonic_ns() - t0
        return rebuild(batch, moved), event

    def finish(self, started):
        """The device batch, once the consumer's stream waits for its copy."""
        batch, event = started
        stream = self._torch.cuda.current_stream(self._device)
        stream.wait_event(event)
        for x in leaves(batch):
            x.record_stream(stream)
        return batch
