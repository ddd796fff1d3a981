"""Mutation testing of ``pina_ntk``: mutmut's score per module."""
