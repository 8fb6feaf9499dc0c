"""Checkpoints, resume and warm start in one place, each save beside its restore:
`connector.CheckpointConnector` (what a run restores and what it writes, as Lightning's
checkpoint connector), `checkpoints` (epoch checkpoints: write, find, restore), `callback_state`
(the callbacks' counters carried across a resume), `top_k` (the best K epochs' models),
`warm_start` (another run's weights), `config_match` (a resume must continue the same run) and
`history_files` (the CSV and TensorBoard logs rewritten to the checkpointed epochs).
"""
