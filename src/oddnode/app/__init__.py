"""The top: the main job (``check``), the node's quick health check
(``health``), synthetic datasets (``synth``) and the command line (``cli``)."""
