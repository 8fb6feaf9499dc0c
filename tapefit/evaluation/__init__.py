"""Evaluation of pair models over a whole split, beyond what a batch can tell: rank
correlations, AUC and the threshold accuracy chosen on validation (`metrics`), and retrieval
of each query's relevant texts from a collection (`retrieval`), each with the callback that
adds them to the epoch logs. Below `tapefit.models`, which reports them."""
