"""Graphviz DOT text of a view of the graph, and of the worker summary.

``draw`` builds a view's DOT, ``summary`` the worker summary's, ``collapse`` plans what each
drawn box stands for, ``style`` and ``text`` hold the colours, quoting and ids they share;
``distviz.render.graphviz_backend`` lays the text out.
"""
