"""The trace sketches' accuracy on the wave tutorial: one sketch's variance
and spaced sketch samples against k."""
