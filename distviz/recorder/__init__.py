"""The recorder (torch side): the live distributed autograd graph of a context as trace pieces
(``graph``), and the hooks that observe the real backward on every node (``hooks``)."""
