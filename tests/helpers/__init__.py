"""What several test layers share: local servers, stores built by hand, browser and AppTest drivers, and the
checkout's paths (``helpers.paths``)."""
