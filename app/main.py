"""SpecScope dashboard: `streamlit run app/main.py`.

Serves the pages of ``dashboard.py``; at start, before the first viewer, the landing pages run
once without a browser so their data and figures are already in the shared caches (``ui.warm``).
A dashboard shared with the network prints the address to hand out and the operator's, with the
token (``ui.access``), and serves the routes that keep an operator's browser an operator.
"""

from contextlib import asynccontextmanager

import streamlit as st

from ui import access, warm


@asynccontextmanager
async def lifespan(app):
    access.announce()
    async with warm.lifespan(app):
        yield


app = st.App("dashboard.py", lifespan=lifespan, routes=access.routes())
