"""SpecScope dashboard: `streamlit run app/main.py`.

Serves the pages of ``dashboard.py``; at start, before the first viewer, the landing pages run
once without a browser so their data and figures are already in the shared caches (``ui.warm``).
A dashboard shared with the network prints the address to hand out and the operator's, with the
token (``ui.access``), and serves the routes that keep an operator's browser an operator; every page it
serves tells the browser where its backend is (``ui.base_url``), so a deep link logs no 404.
"""

from contextlib import asynccontextmanager

import streamlit as st
from starlette.middleware import Middleware

from ui import access, warm
from ui.base_url import BackendBaseUrl


@asynccontextmanager
async def lifespan(app):
    access.announce()
    async with warm.lifespan(app):
        yield


# deep links (/live, /theory) find the backend at once, without 404s on /live/_stcore/... (ui.base_url)
app = st.App("dashboard.py", lifespan=lifespan, routes=access.routes(), middleware=[Middleware(BackendBaseUrl)])
