"""The serving floor: a bare FastAPI app that validates one heart record with pydantic and answers a constant.

    python benchmarks/floor_app.py --port 8100 --workers 2

It stands for the least any Python ASGI service pays per request on this stack: uvicorn with uvloop and
httptools, N processes each with its own SO_REUSEPORT listener (as `neurules-admin serve` runs ours),
pydantic validating a body shaped like ours, a JSON reply. `benchmarks/serving.py` measures ours
against it in the same run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import socket
import time

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict, Field, create_model

HEART_FIELDS = [f"att_{i}" for i in range(1, 13)] + ["att_13_-1.0", "att_13_0.5", "att_13_1.0"]

HeartRecord: type[BaseModel] = create_model(  # one field per heart column, named by alias (they hold '-' and '.')
    "HeartRecord",
    __config__=ConfigDict(extra="forbid"),
    **{f"f{i}": (float | None, Field(alias=name)) for i, name in enumerate(HEART_FIELDS)},  # type: ignore[call-overload]
)


class Body(BaseModel):
    """The request body: a list of records, as `POST /v1/models/{ref}/predict` takes it."""

    records: list[HeartRecord]  # type: ignore[valid-type]


CONSTANT = {
    "model_version": {"id": "mv_floor", "name": "floor", "version": 1},
    "classes": [0, 1],
    "predictions": [{"index": 0, "prediction": 1, "probabilities": {"0": 0.2, "1": 0.8}, "rule_id": 1}],
}

app = FastAPI()


@app.post("/v1/models/{ref}/predict")
async def predict(ref: str, body: Body) -> dict[str, object]:
    """Validate the body, answer a constant."""
    return CONSTANT


@app.get("/readyz")
async def ready() -> dict[str, str]:
    """Up."""
    return {"status": "ready"}


def _listener(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(2048)
    return sock


def _serve(port: int) -> None:
    import uvicorn

    config = uvicorn.Config(
        app, loop="uvloop", http="httptools", access_log=False, log_level="warning", server_header=False
    )
    uvicorn.Server(config).run(sockets=[_listener(port)])


def main() -> None:
    """Run `--workers` processes on 127.0.0.1:`--port`, each with its own listener; stop them on SIGTERM."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_serve, args=(args.port,)) for _ in range(args.workers)]
    for p in procs:
        p.start()

    def stop(*_: object) -> None:
        for p in procs:
            if p.pid is not None and p.is_alive():
                os.kill(p.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while all(p.is_alive() for p in procs):
        time.sleep(0.3)
    stop()
    for p in procs:
        p.join(10)


if __name__ == "__main__":
    main()
