"""The cost of a training step with each NTK loss weighting on the wave
problem: time per step, peak extra memory, and both in one report."""
