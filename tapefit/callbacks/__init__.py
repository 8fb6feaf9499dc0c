"""Every Keras callback tapefit brings, one job per module: `progress` (progress bar, epoch
lines), `telemetry` (per-step gradient norm, learning rate, loss scale; the non-finite guard),
`tensorboard` (Keras' TensorBoard, step-exact), `best_epoch` (the selected epoch's weights),
`averaging` (weight EMA swapped in for validation), `stop_on_signal` (a clean stop after a
step), and `configured` (the callbacks the `callbacks` config group names). Callbacks that
judge epochs by a metric share `monitored.MonitoredCallback`.

Two concerns keep their callbacks at home: checkpointing (`tapefit.checkpointing`: epoch
checkpoints, the best K models, callback states; each save beside its restore) and evaluation
(`tapefit.evaluation`: pair metrics and retrieval on validation data).
"""
