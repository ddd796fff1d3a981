"""Issue #70, NTK weights on PINA's multi-model solvers: the ensemble and
the self-adaptive solver, their errors and the default's cost on them."""
