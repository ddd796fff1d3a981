"""The paper's application of the NTK weights, on top of the library.

* :mod:`~pina_ntk.paper.problems`: the wave and Q-tensor problems;
* :mod:`~pina_ntk.paper.reference`: the Q-tensor finite-element reference
  (needs the ``fem`` extra);
* :mod:`~pina_ntk.paper.experiments`: settings, models, the training loop
  and outputs of the experiments;
* :mod:`~pina_ntk.paper.cli`: the ``pina-ntk`` command;
* :mod:`~pina_ntk.paper.figures`: the figures.

It uses the library only through :mod:`pina_ntk.integration` and
:mod:`pina_ntk.core`; nothing below imports from here.
"""
