"""The HTML step viewer (pure): ``page`` makes the self-contained page of one replay (its script
and style in ``viewer/``), ``data`` the data it reads, ``contexts`` the page of a recording of
several contexts."""
