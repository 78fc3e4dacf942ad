"""ddpscope.torch.layer_ranges: every module's forward in a ddpscope.layer:<path> profiler range
while the ``with`` lasts, named as import-torch reads them (the model's own module paths, also
through a wrapper), one range per call, none after the ``with``, none left open by a forward
that raises. Profiled with torch's own profiler (the Kineto one where torch has it)."""

import pytest

import ddpscope

torch = pytest.importorskip("torch")
nn = torch.nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.fc(self.act(x)))  # self.act called twice


class Boom(nn.Module):
    def forward(self, x):
        raise RuntimeError("boom")


def _model():
    return nn.Sequential(nn.Linear(4, 4), Block())


def _ranges(run):
    """(name, start, end) of the ddpscope.layer: ranges the profiler saw while run() ran."""
    with torch.autograd.profiler.profile() as prof:
        run()
    return [(e.name, e.time_range.start, e.time_range.end) for e in prof.function_events
            if e.name.startswith("ddpscope.layer:")]


def test_each_modules_forward_is_a_range_named_by_its_path_one_per_call():
    model = _model()

    def step():
        with ddpscope.torch.layer_ranges(model):
            model(torch.randn(2, 4)).sum().backward()

    ranges = _ranges(step)
    assert [name for name, _, _ in ranges] == [
        "ddpscope.layer:0", "ddpscope.layer:1", "ddpscope.layer:1.act", "ddpscope.layer:1.fc",
        "ddpscope.layer:1.act"]
    # A child's range lies inside its parent's.
    _, start, end = ranges[1]
    assert all(start <= s and e <= end for _, s, e in ranges[2:])


def test_no_range_after_the_with_and_the_same_paths_through_a_wrapper():
    model = _model()
    with ddpscope.torch.layer_ranges(model):
        pass
    assert _ranges(lambda: model(torch.randn(2, 4))) == []
    # DataParallel (like DistributedDataParallel) keeps the model as .module: the paths are the
    # model's own, as the model given to import-torch --model names its layers.
    wrapped = nn.DataParallel(model)

    def step():
        with ddpscope.torch.layer_ranges(wrapped):
            wrapped(torch.randn(2, 4))

    names = [name for name, _, _ in _ranges(step)]
    assert names[:2] == ["ddpscope.layer:0", "ddpscope.layer:1"]
    assert not any(name.startswith("ddpscope.layer:module") for name in names)


def test_a_forward_that_raises_leaves_no_range_open():
    model = nn.Sequential(nn.Linear(4, 4), Boom())

    def step():
        with pytest.raises(RuntimeError, match="boom"):
            with ddpscope.torch.layer_ranges(model):
                model(torch.randn(2, 4))

    ranges = _ranges(step)
    assert [name for name, _, _ in ranges] == ["ddpscope.layer:0", "ddpscope.layer:1"]
    assert all(end >= start for _, start, end in ranges)
    # Profiling goes on normally afterwards: nothing of the hooks is left.
    plain = nn.Sequential(nn.Linear(4, 4))
    assert _ranges(lambda: plain(torch.randn(2, 4))) == []


def test_anything_but_a_module_is_refused_by_name():
    with pytest.raises(TypeError, match="layer_ranges: expected a torch.nn.Module, got str"):
        with ddpscope.torch.layer_ranges("model"):
            pass
