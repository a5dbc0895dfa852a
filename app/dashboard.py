"""SpecScope dashboard: the pages and their navigation (`streamlit run app/main.py` serves this)."""

from typing import TypedDict

import streamlit as st

from ui import access


class PageLook(TypedDict):
    """The title and icon two entries of one page share."""

    title: str
    icon: str


# Page icons: Material icons ship with Streamlit (emoji need a font many Linux browsers lack and drew
# boxes); the tab icon stays an emoji, because a Material page_icon is fetched from fonts.gstatic.com
st.set_page_config(page_title="SpecScope", page_icon="🔭", layout="wide")

EXPLORER: PageLook = {"title": "Explorer", "icon": ":material/insights:"}
pages = [
    st.Page("views/live.py", title="Live", icon=":material/bolt:", url_path="live"),
    st.Page("views/servers.py", title="Servers", icon=":material/dns:", url_path="servers"),
    st.Page("views/runs.py", title="Prompt sets & runs", icon=":material/playlist_play:", url_path="runs"),
    st.Page("views/explorer.py", url_path="explorer", **EXPLORER),
    st.Page("views/theory.py", title="Theory", icon=":material/functions:", url_path="theory"),
    # "/" lands on the Explorer too: a default page is served only at "/", so /explorer needs its own
    st.Page("views/explorer.py", url_path="start", default=True, visibility="hidden", **EXPLORER),
]
access.sign_in()  # shared: a viewer until the session gives the operator token
st.navigation(pages).run()
