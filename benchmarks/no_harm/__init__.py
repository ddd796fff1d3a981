"""Issue #76, whether the default harms where no weighting is needed: the
mechanism study, the ramp's cost and the decision on the candidates."""
