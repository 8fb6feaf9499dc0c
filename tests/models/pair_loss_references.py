"""The pair losses' test batches and NumPy references, written one row at a time from their
definitions: shared by the loss tests in tests/models/losses/ and by tests/models/test_losses.py,
test_pair_losses.py and test_hard_negatives.py (pairs: `ids` and `rows` of two texts; triples:
a third text, the pair's hard negative)."""

import numpy as np


def unit(rows):
    rows = np.asarray(rows, "float32")
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


# Four pairs of 3-d embeddings chosen by hand: identical, orthogonal, opposite, 60 degrees.
A = unit([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]])
B = unit([[1, 0, 0], [1, 0, 0], [0, 0, -1], [1, 0, 0]])
PAIR = np.stack([A, B], axis=1)
COS = np.sum(A * B, axis=1)  # [1, 0, -1, 0.7071]


def batch(seed, size=12, dim=7):
    rng = np.random.default_rng(seed)
    embeddings = rng.normal(size=(size, 2, dim))
    embeddings /= np.linalg.norm(embeddings, axis=-1, keepdims=True)
    labels = rng.integers(0, 6, size).astype("float64")  # graded 0-5, with ties
    return labels, embeddings


def in_batch(seed, size=10, dim=6):
    """Positive pairs whose rows 0 and 1 share an anchor text and rows 2 and 3 a positive."""
    rng = np.random.default_rng(seed)
    pairs = rng.normal(size=(size, 2, dim))
    pairs /= np.linalg.norm(pairs, axis=-1, keepdims=True)
    ids = np.arange(2 * size).reshape(size, 2)
    ids[1, 0] = ids[0, 0]
    ids[3, 1] = ids[2, 1]
    return ids, pairs


def triples(seed, size=8, dim=6):
    """Unit rows `(anchor, positive, negative)` and their text ids, with collisions: rows 0 and
    1 share an anchor, row 1's negative is row 0's anchor text, row 2's negative is row 3's
    positive text."""
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(size, 3, dim))
    rows /= np.linalg.norm(rows, axis=-1, keepdims=True)
    ids = np.arange(3 * size).reshape(size, 3)
    ids[1, 0] = ids[0, 0]
    ids[1, 2] = ids[0, 0]
    ids[2, 2] = ids[3, 1]
    return ids, rows


def reference_angle(first, second):
    """Li and Li's angle similarity, one row at a time in complex arithmetic."""
    out = []
    for x, w in zip(first, second, strict=True):
        if len(x) % 2:
            x, w = np.append(x, 0.0), np.append(w, 0.0)
        half = len(x) // 2
        zx, zw = x[:half] + 1j * x[half:], w[:half] + 1j * w[half:]
        quotient = zx / np.linalg.norm(zw) ** 2 * np.conj(zw)  # zx / zw, over the whole norm
        quotient *= np.linalg.norm(zw) / np.linalg.norm(zx)
        out.append(abs(np.sum(quotient.real) + np.sum(quotient.imag)))
    return np.array(out)


def negatives_of(ids, i):
    """Rows j whose positive is a true negative of row i (no shared text)."""
    return [
        j for j in range(len(ids)) if j != i and ids[j, 0] != ids[i, 0] and ids[j, 1] != ids[i, 1]
    ]


def hard_negatives_of(ids, i):
    """Rows j whose negative (third text) is a negative of row i: not row i's anchor or
    positive text; none for pairs."""
    if ids.shape[1] < 3:
        return []
    return [j for j in range(len(ids)) if ids[j, 2] not in (ids[i, 0], ids[i, 1])]


def _cross_entropy(logits):  # the target is the first logit
    return -(logits[0] - np.log(np.sum(np.exp(logits))))


def reference_in_batch_negatives(ids, rows, scale, symmetric):
    """`in_batch_negatives`: each anchor against its positive (first), the batch's other
    positives and the hard negatives; `symmetric` also each positive against the anchors."""
    forward, backward = [], []
    for i in range(len(ids)):
        others = negatives_of(ids, i)
        hard = [row[2] for row in rows[hard_negatives_of(ids, i)]]
        candidates = [rows[i, 1], *rows[others, 1], *hard]
        forward.append(_cross_entropy(scale * np.array(candidates) @ rows[i, 0]))
        backward.append(_cross_entropy(scale * rows[[i, *others], 0] @ rows[i, 1]))
    return (np.mean(forward) + np.mean(backward)) / 2 if symmetric else np.mean(forward)


def reference_triplet(ids, rows, margin, mining):
    """`triplet`: the margin violations of each anchor's negatives (the batch's other
    positives and the hard negatives), the hardest (`mining="hard"`) or the mean of the
    active ones (`"all"`)."""
    losses = []
    for i in range(len(ids)):
        positive = rows[i, 0] @ rows[i, 1]
        negatives = [
            *rows[negatives_of(ids, i), 1],
            *(row[2] for row in rows[hard_negatives_of(ids, i)]),
        ]
        violations = [max(0.0, rows[i, 0] @ n - positive + margin) for n in negatives]
        active = [v for v in violations if v > 0]
        losses.append(max(violations) if mining == "hard" else sum(active) / max(len(active), 1))
    return np.mean(losses)
