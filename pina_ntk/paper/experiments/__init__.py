"""The paper's experiments, shared by the command line and the tutorials.

* :mod:`~pina_ntk.paper.experiments.settings`: the settings and the
  weighting they build;
* :mod:`~pina_ntk.paper.experiments.models`: the network;
* :mod:`~pina_ntk.paper.experiments.training`: the training loop;
* :mod:`~pina_ntk.paper.experiments.outputs`: errors, summaries, files;
* :mod:`~pina_ntk.paper.experiments.wave`,
  :mod:`~pina_ntk.paper.experiments.qtensor`: the two experiments.
"""
