"""SpecScope dashboard: `streamlit run app/main.py`.

Serves the pages of ``dashboard.py``; at start, before the first viewer, the landing pages run
once without a browser so their data and figures are already in the shared caches (``ui.warm``).
"""

import streamlit as st

from ui.warm import lifespan

app = st.App("dashboard.py", lifespan=lifespan)
