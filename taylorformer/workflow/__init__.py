"""A training run from start to finish, one module each (none imported here: each loads only
what it needs):

* :mod:`~taylorformer.workflow.training`: training into a run directory over Keras ``fit``
  (:func:`taylorformer.train`);
* :mod:`~taylorformer.workflow.callbacks`: the Keras callbacks a run directory needs (step
  counter, time budget, atomic checkpoints, metric rows);
* :mod:`~taylorformer.workflow.run_dir`: the run directory's layout and every read and write
  of it;
* :mod:`~taylorformer.workflow.runs`: finished runs: load, evaluate, plot, predict
  (:func:`taylorformer.evaluate_run`);
* :mod:`~taylorformer.workflow.evaluation`: the metrics (log-likelihood, RMSE, coverage,
  sampled forecasts, order consistency);
* :mod:`~taylorformer.workflow.baselines`: the replication rows' baselines (persistence,
  seasonal naive, exact GP, context frequencies) and their error bars (iid, batch means).
"""
