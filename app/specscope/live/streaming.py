"""How a Live session's panes stream: every pane prepared first (warm-up, the fresh-prompt check; all of them
before any streams, so no warm-up runs beside a measurement), then all at once (race) or one after another
(fair), one thread each."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx

from specscope.live.pane import Pane

__all__ = ["stream"]


def stream(panes: list[Pane], mode: str, transports: dict[str, httpx.BaseTransport]) -> None:
    """Prepare every pane, then stream them in ``mode`` ('race' or 'fair'); returns when all have ended."""

    def each(work: Callable[[Pane], None]) -> list[threading.Thread]:
        threads = [threading.Thread(target=work, args=(p,), daemon=True, name="specscope-live") for p in panes]
        for thread in threads:
            thread.start()
        return threads

    for thread in each(lambda p: p.prepare(transports.get(p.spec.label))):
        thread.join()
    if mode == "race":
        streams = each(lambda p: p.run(transports.get(p.spec.label)))
    else:

        def in_turn() -> None:
            for pane in panes:
                pane.run(transports.get(pane.spec.label))

        streams = [threading.Thread(target=in_turn, daemon=True, name="specscope-live")]
        streams[0].start()
    for thread in streams:
        thread.join()
