"""Issue #69, NTK weights on inverse problems: the study of the unknowns'
treatment, PINA's inverse tutorial logged, and the cost of exact weights."""
