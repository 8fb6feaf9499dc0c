"""Text processing the models and the loaders share: a word vocabulary learnt from texts
(`vocabulary`), KerasHub's WordPiece vocabulary and tokenizer (`wordpiece`), and pretrained
word vectors (`word_vectors`). Below both `tapefit.models` and `tapefit.data`, so a model
needs no loader to read its texts."""
