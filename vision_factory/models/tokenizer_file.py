"""The tokenizer of a text-prompted export, read from its own file with the ``tokenizers`` library: never a download.

Where it is looked for: the file given (a ``tokenizer.json``, or for BERT WordPiece a ``vocab.txt``), else beside
the model, else, for a model in an ``onnx/`` folder (the transformers.js and optimum layout of a Hub repository),
in the folder above. A missing file is refused naming every path looked at; a file that is not a tokenizer, larger
than MAX_TOKENIZER_BYTES, not a regular file or not UTF-8 is refused naming it. Whether it fits the model (its
algorithm, its special tokens' ids) is the adapter's check (``require``), which names the file too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..files import UnreadableFile, read_limited
from ..text import shown_path, untrusted

MAX_TOKENIZER_BYTES = 64 << 20  # CLIP's tokenizer.json is 3.6 MB, bert-base-uncased's 0.7 MB
TOKENIZER_JSON, VOCAB_TXT = "tokenizer.json", "vocab.txt"
WORDPIECE, BPE = "WordPiece", "BPE"


@dataclass(frozen=True)
class TokenizerFile:
    """A tokenizer read from ``path``: ``tokenizer`` answers ``encode``, ``token_to_id`` and ``get_vocab_size`` as
    a ``tokenizers.Tokenizer`` does; ``algorithm`` is WORDPIECE or BPE (or the file's own word for another)."""

    path: Path
    tokenizer: Any
    algorithm: str

    def refuse(self, problem: str, fix: str) -> ValueError:
        """The error of a tokenizer that does not fit its model: the file, what is wrong, and the fix."""
        return ValueError(f"tokenizer {shown_path(self.path)} {problem}: {fix}")

    def phrase_rows(
        self, phrases: Sequence[str], limit: int, reader: str, length: int | None = None, rows: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``input_ids`` and ``attention_mask`` [rows, length] of int64, a phrase a row (a CLIP text tower's input:
        OWL's queries, YOLO-World's text encoder), each row its tokens then zeros (mask 0 there); ``length``
        None: the longest phrase's, ``rows`` None: one a phrase. A phrase of more than ``limit`` tokens is refused
        naming it and ``reader``, what reads that many."""
        encodings = self.tokenizer.encode_batch(list(phrases))
        for phrase, encoding in zip(phrases, encodings):
            if len(encoding.ids) > limit:
                raise ValueError(
                    f"the phrase '{untrusted(phrase, 80)}' is {len(encoding.ids)} tokens, more than the {limit} "
                    f"{reader} reads: shorten it"
                )
        ids = np.zeros((rows or len(phrases), length or max(len(encoding.ids) for encoding in encodings)), np.int64)
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)], mask[row, : len(encoding.ids)] = encoding.ids, 1
        return ids, mask

    def require(self, check: bool, problem: str, fix: str) -> None:
        if not check:
            raise self.refuse(problem, fix)


def candidates(model_path: str | os.PathLike, names: Sequence[str]) -> list[Path]:
    """Where the tokenizer of the model at ``model_path`` is looked for, in order: each of ``names`` beside it,
    then, for a model in an ``onnx`` folder, in the folder above."""
    folder = Path(model_path).parent
    folders = [folder, folder.parent] if folder.name == "onnx" else [folder]
    return [place / name for place in folders for name in names]


def find_tokenizer(model_path: str | os.PathLike, given: str | os.PathLike | None, names: Sequence[str]) -> Path:
    """The tokenizer file given, or the first of ``candidates`` that exists; a ValueError naming every path looked
    at when none does."""
    fix = f"put the export's {names[0]} beside the model or give its path (the tokenizer parameter, --tokenizer); it "
    return find_beside(model_path, given, names, "tokenizer", fix + "is never downloaded")


def find_beside(
    model_path: str | os.PathLike, given: str | os.PathLike | None, names: Sequence[str], what: str, fix: str
) -> Path:
    """The file of the model at ``model_path`` that is ``what`` (its tokenizer, its text encoder): the one given, or
    the first of ``candidates`` that exists; a ValueError naming every path looked at, then ``fix``, when none
    does."""
    if given:
        path = Path(given)
        if not path.exists():
            raise ValueError(f"{what} {shown_path(path)} not found: give the path of the export's {names[0]}")
        return path
    looked = candidates(model_path, names)
    found = next((path for path in looked if path.exists()), None)
    if found is None:
        places = ", ".join(shown_path(path) for path in looked)
        raise ValueError(f"no {what} for {shown_path(model_path)}: looked for {places}; {fix}")
    return found


def load_tokenizer(
    model_path: str | os.PathLike, given: str | os.PathLike | None, names: Sequence[str]
) -> TokenizerFile:
    """``find_tokenizer`` then ``read_tokenizer``."""
    return read_tokenizer(find_tokenizer(model_path, given, names))


def read_once(path: str | os.PathLike) -> TokenizerFile:
    """``read_tokenizer``, once per file as it is (its real path, size and time of change): an adapter built again
    for a new prompt or task takes the tokenizer already read, and an edited file is read again."""
    path = Path(path)
    status = path.stat()
    return _read_once(str(path.resolve()), status.st_size, status.st_mtime_ns)


@lru_cache(maxsize=4)
def _read_once(path: str, size: int, changed: int) -> TokenizerFile:
    return read_tokenizer(path)


def read_tokenizer(path: str | os.PathLike) -> TokenizerFile:
    """The tokenizer in ``path``: a ``tokenizer.json`` (any name but vocab.txt), or a BERT WordPiece ``vocab.txt``
    (one token a line, read as transformers' uncased BertTokenizer reads it: lower case, [CLS] text [SEP])."""
    path = Path(path)
    text = _read(path)
    if path.name == VOCAB_TXT:
        return _wordpiece(path, text)
    from tokenizers import Tokenizer

    try:
        algorithm = str(json.loads(text)["model"]["type"])
        tokenizer = Tokenizer.from_str(text)
    except Exception as error:  # json's ValueError, a missing key, or the library's own Exception
        raise ValueError(
            f"tokenizer {shown_path(path)} is not a tokenizers tokenizer.json ({untrusted(error, 200)}): give the "
            "export's own tokenizer.json"
        ) from None
    return TokenizerFile(path, tokenizer, untrusted(algorithm, 40))


def _wordpiece(path: Path, text: str) -> TokenizerFile:
    from tokenizers.implementations import BertWordPieceTokenizer

    vocab = {token: index for index, token in enumerate(text.split("\n"))}  # as transformers: a repeated token's last
    vocab.pop("", None)
    try:  # the library's own reading of a BERT vocabulary: uncased, [CLS] $A [SEP]
        tokenizer = BertWordPieceTokenizer(vocab, lowercase=True)
    except Exception as error:  # a vocabulary without [CLS] or [SEP] is refused by the library's constructor
        raise ValueError(
            f"tokenizer {shown_path(path)} is not a BERT vocabulary ({untrusted(error, 200)}): give the export's "
            "vocab.txt or tokenizer.json"
        ) from None
    return TokenizerFile(path, tokenizer, WORDPIECE)


def _read(path: Path) -> str:
    """The text of a regular file of at most MAX_TOKENIZER_BYTES."""
    fix = "give the export's own tokenizer file"
    try:
        data = read_limited(path, MAX_TOKENIZER_BYTES)
    except UnreadableFile as error:
        raise ValueError(f"tokenizer {shown_path(path)} {error}: {fix}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"tokenizer {shown_path(path)} is not UTF-8 text: {fix}") from None
