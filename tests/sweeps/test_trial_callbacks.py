"""The callbacks a search adds to each trial's run (`tapefit.sweeps.trial_callbacks`)."""


def test_a_resumed_trial_reports_its_epochs_from_before_the_stop_again(tmp_path):
    """A stop between an epoch's checkpoint and its report to the study would leave that epoch
    unreported; the resumed trial reports the checkpointed epochs again (repeats are ignored)."""
    from tapefit.checkpointing.checkpoints import EpochCheckpoint
    from tapefit.sweeps.trial_callbacks import EpochReport

    reported = []
    watch = EpochReport("val_accuracy", lambda value, epoch: reported.append((value, epoch)))
    earlier = [{"val_accuracy": 0.5}, {"val_accuracy": 0.75}]
    watch.use_callbacks([EpochCheckpoint(tmp_path, {}, earlier)])
    watch.on_train_begin()
    assert reported == [(0.5, 0), (0.75, 1)]
