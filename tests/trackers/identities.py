"""An identity file as the mlflow hook writes it before its tracker run exists, for the tests of the spool's files."""

MLFLOW = {
    "folder_id": "0f3a",
    "backend": "mlflow",
    "tracking_uri": "http://127.0.0.1:9",
    "experiment": "e",
    "run_name": "e/run_001",
    "parent": None,
    "sent": 0,
}
