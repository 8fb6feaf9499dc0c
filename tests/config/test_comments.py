"""tapefit/config/comments.py: a key's description is read from the comments beside it."""

from tapefit.config.comments import yaml_comments


def test_yaml_comments_follow_nesting_and_comment_lines_above():
    text = "# summary\nencoder:  # the encoder\n  # above\n  units: 4  # beside\nrate: '#1'\n"
    assert yaml_comments(text) == {"encoder": "the encoder", "encoder.units": "above beside"}
