"""The README's Python snippets and commands run as written, on what the README's own commands produce (issue 20,
item 8). Regression: the "Video models" snippet failed with the 32 px ``runs/ape`` the README's recipe trains, and the
eval-video example named runs no README command creates.

Commands run in-process (``zoo.cli.main``) in a temporary working directory, in README order, with tiny settings
where the README's take long (:data:`TINY`: fewer clips, questions, epochs and cells; the options appended last win).
Every fenced ``python`` / ``bash`` block is either run or listed in :data:`LEFT_OUT` with the reason
(:func:`test_every_block_is_run_or_left_out`), so a new snippet cannot go untested silently.

Left out, and why:

* the quick-start and test commands (``python3 -m venv .venv && ... zoo demo`` / ``pytest``): they create a venv and
  install packages from the network; ``.ci/run`` runs both exactly as written, each in a venv of its own;
* the CLIP block: ``load_clip_checkpoint(..., 'ViT-B-16.pt')`` and ``create_model_from_clip('ViT-B-16.pt')`` need
  OpenAI / open_clip weights that are not in the repository;
* in the first block, the ``pretrained=True`` model: it downloads timm/naver weights (the other two models run);
* ``tar -xzf ../shared/data/cifar10-jpg.tar.gz``: replaced by a tiny folder of the same layout (10 classes,
  ``train/`` and ``test/``), so the CIFAR-10 commands run in seconds on the tiny settings.
"""
import ast
import os
import shlex
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from zoo.cli import main

README = Path(__file__).resolve().parents[1] / 'README.md'
REPO = README.parent

#: options appended to each subcommand (argparse keeps the last value): tiny data, one epoch, few cells
TINY = {
    'train': ['--epochs', '1', '-b', '8', '-j', '0', '--no-progress', '--threads', '1'],
    'train-vlm': ['--epochs', '1', '-b', '4', '-j', '0', '--no-progress', '--threads', '1'],
    'eval-resolution': ['-j', '0', '--no-progress', '--threads', '1'],
    'eval-frames': ['--frames', '4', '8', '--sizes', '32', '-j', '0', '--no-progress', '--threads', '1'],
    'eval-video': ['--frames', '8', '16', '-j', '0', '--no-progress', '--max-new-tokens', '2', '--threads', '1'],
    'make-videos': ['--num-per-class', '2', '--val-per-class', '1', '--frames', '16', '--clips-dir', 'none'],
    'make-videoqa': ['--num-per-task', '2', '--frames', '16', '--niah-lengths', '8', '16', '--niah-per-cell', '1',
                     '--clips-dir', 'none'],
}

#: the first line of each block not run, with the reason (see the module docstring)
LEFT_OUT = {
    'python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/zoo demo':
        'creates a venv and installs from the network; .ci/run runs it as written',
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest":
        'creates a venv and installs from the network, then runs this test suite; .ci/run runs it as written',
    'import open_clip, zoo': 'needs the OpenAI / open_clip ViT-B-16.pt weights, not in the repository',
    'ZOO_LMMS_SYNTHETIC_ROOT=data/vqa-diag-eval HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 .venv-lmms/bin/lmms-eval '
    '--model zoo \\':
        'needs lmms-eval (zoo[lmms], a venv of its own): tests/integrations/test_lmms_eval.py runs it there',
}


def blocks():
    """``[(line number, language, text)]`` of the README's fenced code blocks."""
    out, lang, start, buf = [], None, 0, []
    for n, line in enumerate(README.read_text().splitlines(), 1):
        if line.startswith('```'):
            if lang is None:
                lang, start, buf = line[3:].strip(), n, []
            else:
                out.append((start, lang, '\n'.join(buf)))
                lang = None
        elif lang is not None:
            buf.append(line)
    return out


def block(first_line):
    """The text of the block whose first line starts with ``first_line``."""
    hits = [(n, text) for n, lang, text in blocks() if text.startswith(first_line)]
    assert len(hits) == 1, f'README has {len(hits)} blocks starting {first_line!r}'
    return hits[0]


def commands(text):
    """The shell commands of a bash block: continuation lines joined, comments dropped, ``&&`` chains split."""
    out = []
    for line in text.replace('\\\n', ' ').splitlines():
        words = shlex.split(line, comments=True)
        cmd = []
        for w in words + ['&&']:
            if w == '&&':
                if cmd:
                    out.append(cmd)
                cmd = []
            else:
                cmd.append(w)
    return out


def tiny_cifar(root):
    """``data/cifar10/{train,test}/<class>/*.jpg`` of the tarball's layout: 10 classes, 4 + 2 images of 32 px."""
    rng = np.random.default_rng(0)
    classes = ['airplane', 'automobile', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship', 'truck']
    for split, n in (('train', 4), ('test', 2)):
        for c, name in enumerate(classes):
            os.makedirs(root / split / name, exist_ok=True)
            for i in range(n):
                img = rng.integers(0, 80, (32, 32, 3), dtype=np.uint8)
                img[..., c % 3] += 120
                Image.fromarray(img).save(root / split / name / f'{i:04d}.jpg')


def run(cmd, where):
    """Run one README command in ``where``: ``zoo ...`` in-process with :data:`TINY`, ``mkdir``, and the CIFAR
    tarball as :func:`tiny_cifar`."""
    prog = os.path.basename(cmd[0])
    if prog == 'mkdir':
        for d in cmd[1:]:
            if not d.startswith('-'):
                os.makedirs(where / d, exist_ok=True)
        return
    if prog == 'tar':
        assert 'cifar10-jpg.tar.gz' in ' '.join(cmd), cmd
        tiny_cifar(where / cmd[cmd.index('-C') + 1])
        return
    assert prog == 'zoo', f'unknown README command {cmd}'
    argv = cmd[1:] + TINY.get(cmd[1], [])
    assert main(argv) == 0, f'README command failed: {" ".join(cmd)}'


@pytest.fixture(scope='module')
def work(tmp_path_factory):
    """The working directory of the README's commands: the configs of the repository and nothing else."""
    where = tmp_path_factory.mktemp('readme')
    os.symlink(REPO / 'configs', where / 'configs')
    return where


@pytest.fixture
def inside(work, monkeypatch):
    monkeypatch.chdir(work)
    return work


def exec_block(n, text, drop=lambda src: False):
    """Run a Python block as written, without the statements ``drop(source)`` selects."""
    tree = ast.parse(text)
    tree.body = [s for s in tree.body if not drop(ast.get_source_segment(text, s))]
    exec(compile(tree, f'README.md:{n}', 'exec'), {'__name__': '__readme__'})


def test_every_block_is_run_or_left_out():
    run_here = {'import timm, zoo', '# an ImageFolder', 'import timm, torch, zoo', '.venv/bin/zoo make-videos',
                'import zoo ', '.venv/bin/zoo make-videoqa --output data/vqa-diag-train'}
    for n, lang, text in blocks():
        if lang not in ('python', 'bash'):
            continue
        first = text.splitlines()[0]
        assert any(first.startswith(k) for k in run_here) or first in LEFT_OUT, \
            f'README.md:{n}: a {lang} block that this test neither runs nor lists in LEFT_OUT: {first!r}'


@pytest.mark.slow
def test_first_block(inside):
    n, text = block('import timm, zoo')
    exec_block(n, text, drop=lambda src: 'pretrained=True' in src)  # downloads timm/naver weights: left out


@pytest.mark.slow
def test_image_folder_commands_and_the_video_models_snippet(inside):
    """The CIFAR-10 commands (tiny data), then the "Video models" snippet on the runs/ape they trained."""
    n, text = block('# an ImageFolder')
    for cmd in commands(text):
        run(cmd, inside)
    assert (inside / 'runs' / 'ape' / 'checkpoint-last.pth').is_file()
    assert (inside / 'runs' / 'eval' / 'report.md').is_file()
    n, text = block('import timm, torch, zoo')
    exec_block(n, text)


@pytest.mark.slow
@pytest.mark.parametrize('first,report,labels', [
    ('.venv/bin/zoo make-videos', 'runs/eval-frames/report.md', ('rope3d', 'sincos')),
    ('.venv/bin/zoo make-videoqa --output data/vqa-diag-train', 'runs/eval-video/report.md', ('mrope', 'videorope'))],
    ids=['video-folders', 'video-qa'])
def test_video_commands(inside, first, report, labels):
    """The video-folder commands (make-videos, two trainings, eval-frames) and the video-QA commands (questions,
    two train-vlm runs, eval-video): the evaluation reports both runs the README trains."""
    n, text = block(first)
    for cmd in commands(text):
        run(cmd, inside)
    text = (inside / report).read_text()
    assert all(label in text for label in labels)


@pytest.mark.slow
def test_video_llm_snippet(inside):
    n, text = block('import zoo ')
    make = [c for c in commands(text.splitlines()[1].split('# a clip: ')[1].strip('`'))]
    assert make == [['zoo', 'make-videoqa', '--output', 'vqa', '--size', '64']]  # the clip the snippet reads
    run(make[0], inside)
    exec_block(n, text)


def test_subpackages_the_readme_names_work_after_import_zoo():
    """The README calls zoo.datasets.video_backend() and zoo.hf.patch_rope_index after a bare ``import zoo``
    (a fresh user got AttributeError: module 'zoo' has no attribute 'datasets')."""
    import subprocess
    import sys
    code = ('import zoo; assert zoo.datasets.video_backend() in ("decord", "pyav"); '
            'assert callable(zoo.hf.patch_rope_index)\ntry:\n    zoo.no_such_thing\nexcept AttributeError:\n    pass\n'
            'else:\n    raise SystemExit("no AttributeError")')
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd=REPO,
                       env=dict(os.environ, OMP_NUM_THREADS='1'))
    assert r.returncode == 0, r.stderr[-2000:]
