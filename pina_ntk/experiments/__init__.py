"""Experiments shared by the command line and the tutorials."""
