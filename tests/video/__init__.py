"""Video classification: data, metric, models, training."""
