"""Build, cache and serve the tiny models of the hermetic zoo."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from filelock import FileLock

from grader.errors import ZooError
from grader.quiet import quiet_libraries

# Bump when the build procedure changes in a way that changes the files it writes.
ZOO_FORMAT = 2
EOS_TOKEN = "<|endoftext|>"
CORPUS_PATH = Path(__file__).with_name("corpus.txt")
# The tokenizer is trained on English word frequencies (wordfreq's "best" English list) as well as
# the corpus, so that common words are one token as in GPT-2 and ordinary prompts have about as many
# tokens as GPT-2 gives them (a 400-token English prompt fits the 1,024 positions, as with GPT-2).
VOCAB_SIZE = 8192
TOKENIZER_WORDS = 20_000  # the most frequent English words the tokenizer learns from
TOKENIZER_SCALE = 200_000  # occurrences per unit of frequency: ~200k words of training text


@dataclass(frozen=True)
class TinyModel:
    """One tiny GPT-2 of the zoo, and the hub IDs it answers to."""

    name: str
    hub_ids: tuple[str, ...]
    n_layer: int
    n_embd: int = 128
    n_head: int = 4
    # 1024 positions as in GPT-2: long prompts fit, and each layer keeps GPT-2's 1 MiB
    # causal-mask buffer, which memory checks rely on.
    n_positions: int = 1024
    seed: int = 0
    steps: int = 160
    learning_rate: float = 3e-3
    row_tokens: int = 48


TINY_MODELS: tuple[TinyModel, ...] = (
    TinyModel("gpt2", ("gpt2", "openai-community/gpt2"), n_layer=2, seed=0),
    TinyModel("distilgpt2", ("distilgpt2", "distilbert/distilgpt2"), n_layer=1, seed=1),
)


def default_cache_dir() -> Path:
    """Where built zoos are kept: ``$GRADER_CACHE_DIR`` or the user's cache folder."""
    configured = os.environ.get("GRADER_CACHE_DIR")
    if configured:
        return Path(configured) / "zoo"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "llm-inference-grader" / "zoo"


def _repo_folder(hub_id: str) -> str:
    """The hub cache's folder name for a model repository (``models--org--name``)."""
    return "models--" + hub_id.replace("/", "--")


class ModelZoo:
    """The tiny models, built on first use and cached under a content-addressed key."""

    def __init__(
        self,
        cache_dir: Path | None = None,
        models: tuple[TinyModel, ...] = TINY_MODELS,
        corpus_path: Path = CORPUS_PATH,
    ) -> None:
        self.cache_dir = cache_dir if cache_dir is not None else default_cache_dir()
        self.models = models
        self.corpus_path = corpus_path

    @functools.cached_property
    def key(self) -> str:
        """A hash of everything the built files depend on (versions read without importing torch)."""
        recipe = {
            "format": ZOO_FORMAT,
            "corpus": self.corpus_path.read_text(encoding="utf-8"),
            "models": [asdict(model) for model in self.models],
            "torch": importlib.metadata.version("torch").split("+")[0],
            "transformers": importlib.metadata.version("transformers"),
            "tokenizers": importlib.metadata.version("tokenizers"),
            "wordfreq": importlib.metadata.version("wordfreq"),
            "tokenizer": [VOCAB_SIZE, TOKENIZER_WORDS, TOKENIZER_SCALE],
        }
        digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()
        return digest[:16]

    @property
    def root(self) -> Path:
        """The folder of this zoo's build."""
        return self.cache_dir / self.key

    @property
    def hub_cache(self) -> Path:
        """A Hugging Face hub cache (``HF_HUB_CACHE``) holding every hub ID of the zoo."""
        return self.root / "hub"

    def hub_ids(self) -> tuple[str, ...]:
        """Every hub ID the zoo serves."""
        return tuple(hub_id for model in self.models for hub_id in model.hub_ids)

    def model_for(self, hub_id: str) -> TinyModel:
        """The tiny model that answers to ``hub_id``."""
        for model in self.models:
            if hub_id in model.hub_ids:
                return model
        served = ", ".join(self.hub_ids())
        raise ZooError(f"the model zoo has no model for hub ID {hub_id!r}; it serves: {served}")

    def ensure_built(self) -> Path:
        """Build the zoo unless a complete build is cached; return its hub cache."""
        marker = self.root / "complete.json"
        if marker.exists():
            if self.root.stat().st_mode & 0o005 != 0o005:
                # Built by a version that left the zoo private: the sandboxed kernels' own users
                # could not read it.
                _share(self.root)
            return self.hub_cache
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        # Several graders (or test workers) may start at once: one builds, the others wait.
        with FileLock(str(self.cache_dir / f"{self.key}.lock"), timeout=600):
            if marker.exists():
                return self.hub_cache
            staging = Path(tempfile.mkdtemp(prefix=f"{self.key}.", dir=self.cache_dir))
            try:
                manifest = _build_into(staging, self.models, self.corpus_path)
                _share(staging)
                (staging / "complete.json").write_text(json.dumps(manifest, indent=2))
                if self.root.exists():
                    shutil.rmtree(self.root)
                os.replace(staging, self.root)
            except Exception as error:
                shutil.rmtree(staging, ignore_errors=True)
                raise ZooError(f"could not build the tiny model zoo in {self.cache_dir}: {error}") from error
        return self.hub_cache

    def snapshot(self, hub_id: str) -> Path:
        """The local folder holding ``hub_id``'s files (builds the zoo if needed)."""
        self.model_for(hub_id)
        hub_cache = self.ensure_built()
        repo = hub_cache / _repo_folder(hub_id)
        commit = (repo / "refs" / "main").read_text().strip()
        return repo / "snapshots" / commit

    def kernel_env(self) -> dict[str, str]:
        """Environment variables that make a kernel load the zoo's models offline."""
        hub_cache = str(self.ensure_built())
        return {
            "HF_HUB_CACHE": hub_cache,
            # Optimum's from_pretrained(..., export=True) defaults its cache_dir to the legacy
            # name (read once, at import), so it must point at the zoo too.
            "HUGGINGFACE_HUB_CACHE": hub_cache,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }

    def verify(self, hub_ids: Iterable[str]) -> None:
        """Fail with a clear message unless every ID in ``hub_ids`` is served."""
        for hub_id in hub_ids:
            self.model_for(hub_id)


def read_documents(corpus_path: Path) -> list[str]:
    """The corpus's documents: paragraphs separated by blank lines."""
    text = corpus_path.read_text(encoding="utf-8")
    return [paragraph.strip() for paragraph in text.split("\n\n") if paragraph.strip()]


def _build_into(staging: Path, models: tuple[TinyModel, ...], corpus_path: Path) -> dict[str, object]:
    """Train the tokenizer and every model, and lay them out as a hub cache in ``staging``."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2TokenizerFast

    documents = read_documents(corpus_path)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(
        _tokenizer_text(documents), vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=[EOS_TOKEN], show_progress=False
    )
    tokenizer_files = staging / "tokenizer-files"
    tokenizer_files.mkdir()
    bpe.save_model(str(tokenizer_files))
    tokenizer = GPT2TokenizerFast(
        vocab_file=str(tokenizer_files / "vocab.json"),
        merges_file=str(tokenizer_files / "merges.txt"),
        model_max_length=models[0].n_positions,
    )

    manifest: dict[str, object] = {"format": ZOO_FORMAT, "models": {}}
    threads = torch.get_num_threads()
    # One thread: the same floating-point reductions, hence the same weights, on every run.
    torch.set_num_threads(1)
    try:
        with quiet_libraries():
            for spec in models:
                built = staging / "built" / spec.name
                rows = _training_rows(tokenizer, documents, spec.row_tokens)
                loss = _train(spec, tokenizer, rows, built)
                commit = _hash_folder(built)
                for hub_id in spec.hub_ids:
                    _lay_out_repo(staging / "hub", hub_id, built, commit)
                manifest["models"][spec.name] = {  # type: ignore[index]
                    "hub_ids": list(spec.hub_ids),
                    "commit": commit,
                    "final_loss": round(loss, 4),
                }
    finally:
        torch.set_num_threads(threads)
    shutil.rmtree(staging / "built")
    shutil.rmtree(tokenizer_files)
    return manifest


def _tokenizer_text(documents: list[str]) -> Iterator[str]:
    """Text the byte-level BPE learns from: the corpus, and English words as often as English uses them.

    Each word comes lower-case after a space (mid-sentence), and capitalised both after a space and
    at the start of a line (a sentence's or a prompt's first word), so "The", " capital", " France"
    and "Hello" are single tokens as in GPT-2. Deterministic: the same list gives the same merges.
    """
    import re

    from wordfreq import get_frequency_dict

    frequencies = get_frequency_dict("en", wordlist="best")
    words = sorted(
        (item for item in frequencies.items() if re.fullmatch(r"[a-z]+(?:'[a-z]+)?", item[0])),
        key=lambda item: (-item[1], item[0]),
    )[:TOKENIZER_WORDS]
    for _ in range(50):
        yield from documents
    for word, frequency in words:
        count = max(2, round(frequency * TOKENIZER_SCALE))
        capitalised = word.capitalize()
        yield " ".join([word] * count)
        yield " ".join([capitalised] * max(2, count // 4))
        yield "\n".join([capitalised] * max(2, count // 4))


def _training_rows(tokenizer: object, documents: list[str], row_tokens: int) -> list[list[int]]:
    """Token rows that each start at a document, as prompts do, and run on into the next.

    Documents follow each other joined by a space, so generation continues naturally from
    one to the next; only the last document ("... The end.") is followed by the EOS token,
    which gives hidden checks one prompt that stops early.
    """
    encode = tokenizer.encode  # type: ignore[attr-defined]
    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)  # type: ignore[attr-defined]
    rows = []
    for start in range(len(documents)):
        row: list[int] = []
        index = start
        after_eos = True
        while len(row) < row_tokens:
            document = documents[index % len(documents)]
            row += encode(document if after_eos else " " + document)
            after_eos = index % len(documents) == len(documents) - 1
            if after_eos:
                row.append(eos_id)
            index += 1
        rows.append(row[:row_tokens])
    return rows


def _train(spec: TinyModel, tokenizer: object, rows: list[list[int]], out: Path) -> float:
    """Train one tiny model briefly and save it (model, tokenizer, generation config)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)  # type: ignore[attr-defined]
    config = GPT2Config(
        vocab_size=len(tokenizer),  # type: ignore[arg-type]
        n_positions=spec.n_positions,
        n_embd=spec.n_embd,
        n_layer=spec.n_layer,
        n_head=spec.n_head,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        tie_word_embeddings=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.seed)
        model = GPT2LMHeadModel(config)
        batch = torch.tensor(rows)
        optimizer = torch.optim.AdamW(model.parameters(), lr=spec.learning_rate, weight_decay=0.0)
        warmup = 10

        def schedule(step: int) -> float:
            return min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * step / spec.steps))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
        model.train()
        loss = torch.tensor(float("nan"))
        for _ in range(spec.steps):
            loss = model(input_ids=batch, labels=batch).loss
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
    model.eval()
    if model.generation_config is not None:
        model.generation_config.pad_token_id = None
    out.mkdir(parents=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)  # type: ignore[attr-defined]
    return float(loss.item())


def _hash_folder(folder: Path) -> str:
    """A 40-hex-digit commit ID derived from the folder's files."""
    digest = hashlib.sha1()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(folder).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _lay_out_repo(hub_cache: Path, hub_id: str, built: Path, commit: str) -> None:
    """Lay a built model out as the hub cache does: refs/main names a snapshot folder."""
    repo = hub_cache / _repo_folder(hub_id)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for path in built.iterdir():
        shutil.copy2(path, snapshot / path.name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)


def _share(root: Path) -> None:
    """Make a built zoo readable by every user.

    mkdtemp and safetensors write private files; a built zoo is read by other users too: the
    sandboxed kernels' own users, a container's non-root grader, colleagues sharing a cache.
    """
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
