"""The HTML step viewer: one self-contained page of a replay, or of a recording's contexts.

``page`` makes the page of one replay (its script and style in ``viewer/``), ``data`` the data
it reads, ``contexts`` the page of a recording of several contexts.
"""
