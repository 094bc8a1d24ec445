"""The bundled reference server: a real zero-queue inference endpoint and its queued twin.

An ASGI app (`api`), a scheduler (`zero-queue` or `fifo`) and a compute backend
(a small PyTorch transformer, or a calibrated simulation). zqbench never imports
this package except to start it as a subprocess: they share only the wire format.
"""

__version__ = "0.1.0"
