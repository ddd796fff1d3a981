"""The problem suite: its problems, split and decision protocol, the
weightings runner and its pages, and the introductory half."""
