"""zoo's video-QA benchmarks as lmms-eval tasks: the docs come from zoo's readers (:mod:`zoo.datasets.videoqa`),
offline, and zoo's answer reader scores them (the ``zoo_*`` tasks) or lmms-eval's MVBench extraction does
(the ``zoo_*_lmms`` tasks, whose YAML names lmms-eval's own ``mvbench`` functions).

A task YAML (``tasks/*.yaml`` beside this module) sets ``class: !function
zoo.integrations.lmms_eval.videoqa_task.ZooVideoQATask``, ``dataset_path: <zoo reader>`` and
``dataset_kwargs: {task: <zoo task name>}``; :class:`ZooVideoQATask` reads the data root from the task's environment
variable (:data:`zoo.integrations.lmms_eval.ROOT_VARIABLES`) instead of downloading anything.

A doc (one per :class:`~zoo.datasets.videoqa.VideoQARecord`, sorted by id as ``zoo eval-video --max-items`` takes
them, so ``--limit N`` evaluates the same items as ``--max-items N``): ``id``, ``video`` (absolute path),
``question``, ``candidates`` (option texts), ``answer`` (the right option's text, as MVBench has it),
``answer_index`` (0-based), ``start`` / ``end`` (seconds or null), ``task``, ``category``, ``benchmark``.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from . import BENCHMARKS, require_lmms_eval

require_lmms_eval('zoo.integrations.lmms_eval.videoqa_task')

import datasets  # noqa: E402  (a dependency of lmms-eval)
from lmms_eval.api.task import ConfigurableTask  # noqa: E402

from zoo.tasks.answers import fallback_choice, parse_choice  # noqa: E402
from zoo.tasks.videoqa import format_question  # noqa: E402

__all__ = ['ZooVideoQATask', 'load_docs', 'zoo_doc_to_text', 'zoo_process_results', 'zoo_accuracy',
           'zoo_fallbacks', 'UNREADABLE', 'SEED_VARIABLE']

#: what the model answers for an item whose video cannot be read with zoo's protocol (``zoo eval-video`` leaves such
#: items out of the accuracy and counts them; the ``zoo_*`` tasks do the same)
UNREADABLE = '[zoo: unreadable video]'
#: the seed of the random option scored when no answer is read (``zoo eval-video --seed``, default 0)
SEED_VARIABLE = 'ZOO_LMMS_SEED'


def _env_list(name: str) -> Optional[List[str]]:
    value = os.environ.get(name, '').strip()
    return [v for v in value.replace(',', ' ').split() if v] or None


def load_docs(task: str) -> List[Dict[str, Any]]:
    """The docs of zoo task ``task`` (a key of :data:`zoo.integrations.lmms_eval.BENCHMARKS`), read by zoo's reader
    from the data root in its environment variable; ``<VAR minus _ROOT>_TASKS`` (mvbench-layout sets, mlvu: JSON
    stems, comma separated) and ``_SPLIT`` (nextqa_mc, longvideobench) pass the reader's options,
    ``ZOO_LMMS_ALLOW_ROOT`` (``os.pathsep`` separated) its ``allow_roots``.

    Raises:
        ValueError: unknown task, the variable is unset, or the data root holds no usable question (the message of
            ``zoo eval-video``).
        FileNotFoundError / NotADirectoryError / zoo.datasets.videoqa.BenchmarkFormatError: as ``zoo eval-video``
            (the data root is missing, or holds no annotation file of the layout).
    """
    from zoo.datasets.videoqa import get_benchmark, load_benchmark
    if task not in BENCHMARKS:
        raise ValueError(f'unknown zoo lmms-eval task {task!r}; known: {", ".join(BENCHMARKS)}')
    reader, env = BENCHMARKS[task]
    root = os.environ.get(env, '').strip()
    if not root:
        raise ValueError(f'the lmms-eval task zoo_{task} reads its data from ${env}, which is not set: export '
                         f'{env}=DIR, a folder laid out as: {get_benchmark(reader)[1]}')
    prefix = env[:-len('_ROOT')]
    options: Dict[str, Any] = {}
    if _env_list(prefix + '_TASKS'):
        options['tasks'] = _env_list(prefix + '_TASKS')
    if os.environ.get(prefix + '_SPLIT', '').strip():
        options['split'] = os.environ[prefix + '_SPLIT'].strip()
    allow = [p for p in os.environ.get('ZOO_LMMS_ALLOW_ROOT', '').split(os.pathsep) if p]
    records, report = load_benchmark(reader, root, allow_roots=allow, **options)
    if not records:
        hint = report.hint()
        raise ValueError(f'{root!r} holds no usable {reader} question (skipped: {dict(report.skipped) or "none"}); '
                         + (hint or f'check ${env} and ${prefix}_TASKS'))
    return [dict(id=r.id, video=r.video, question=r.question, candidates=list(r.options), answer=r.options[r.answer],
                 answer_index=int(r.answer), start=r.start, end=r.end, task=r.task, category=r.category,
                 benchmark=r.benchmark) for r in sorted(records, key=lambda r: r.id)]


class ZooVideoQATask(ConfigurableTask):
    """An lmms-eval task whose docs come from :func:`load_docs` (``dataset_kwargs: {task: NAME}``), never from the
    hub; everything else (prompt, metrics, generation kwargs) is the YAML's."""

    def __init__(self, config: Optional[dict] = None, model_name: Optional[str] = None, **kwargs: Any):
        config = {k: v for k, v in (config or {}).items() if k != 'class'}
        super().__init__(config=config, model_name=model_name, **kwargs)

    def download(self, dataset_kwargs: Optional[dict] = None) -> None:
        task = (dataset_kwargs or {}).get('task')
        docs = load_docs(task)
        split = self.config.test_split or 'test'
        self.dataset = datasets.DatasetDict({split: datasets.Dataset.from_list(docs)})
        self.dataset_no_image = self.dataset


def zoo_doc_to_text(doc: Dict[str, Any], lmms_eval_specific_kwargs: Optional[dict] = None) -> str:
    """zoo's prompt: the question and lettered options (:func:`zoo.tasks.videoqa.format_question`)."""
    return format_question(doc['question'], list(doc['candidates']))


def zoo_process_results(doc: Dict[str, Any], results: List[str]) -> Dict[str, Any]:
    """zoo's answer reader on one generated answer (:func:`zoo.tasks.answers.parse_choice`; a seeded random option,
    counted as a fallback, when none is read), as ``zoo eval-video`` scores it."""
    text = results[0] if results else ''
    if text.startswith(UNREADABLE):
        item = dict(id=doc['id'], unreadable=1, correct=0, fallback=0)
        return dict(zoo_acc=item, zoo_fallback=item)
    options = list(doc['candidates'])
    parsed = parse_choice(text, options)
    seed = int(os.environ.get(SEED_VARIABLE, '0') or 0)
    pred = parsed if parsed is not None else fallback_choice(seed, doc['id'], len(options))
    item = dict(id=doc['id'], unreadable=0, pred=int(pred), answer=int(doc['answer_index']),
                correct=int(pred == doc['answer_index']), fallback=int(parsed is None))
    return dict(zoo_acc=item, zoo_fallback=item)


def zoo_accuracy(items: List[Dict[str, Any]]) -> float:
    """Accuracy in percent over the items whose video was read (``zoo eval-video``'s ``acc``)."""
    read = [it for it in items if not it['unreadable']]
    return 100.0 * sum(it['correct'] for it in read) / len(read) if read else float('nan')


def zoo_fallbacks(items: List[Dict[str, Any]]) -> int:
    """Items scored by the seeded random option because no answer could be read (``zoo eval-video``'s
    ``fallback``)."""
    return int(sum(it['fallback'] for it in items))
