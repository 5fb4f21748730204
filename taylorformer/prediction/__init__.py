"""What a trained model is used for, one module each (none imported here: each loads only
what it needs):

* :mod:`~taylorformer.prediction.query`: predictions for query files (``taylorformer predict``),
  in bounded memory;
* :mod:`~taylorformer.prediction.placement`: sensor placement (``taylorformer place``,
  :func:`taylorformer.place`);
* :mod:`~taylorformer.prediction.calibration`: PIT, coverage, CRPS, sharpness and
  spread-scale recalibration;
* :mod:`~taylorformer.prediction.export`: a SavedModel that serves without taylorformer
  (``taylorformer export``, :func:`taylorformer.export_run`, :func:`taylorformer.export_model`).

The likelihood and sampling front doors every one of them uses (``loglik``, ``predict``) are
the model family's: :mod:`taylorformer.models.inference`.
"""
