"""The cost of the NTK loss weights as the residual entries and the width
grow, and the default's bookkeeping timed inside one run."""
