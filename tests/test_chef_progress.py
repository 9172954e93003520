"""A2F's re-deployment tells its progress per step (a total of removals to try, then one
call per removal tried), which `archi plan --strategy chef` shows as a rich bar with a
count and the time left on a terminal (4,000 IP templates: minutes, once without a sign)."""

from rich.console import Console

from archipelago.hardware.cluster import resolve_cluster
from archipelago.models.dag_zoo import builtin_dag
from archipelago.strategies.chef.plan import ChefConfig
from archipelago.strategies.chef.planners import plan_chef
from archipelago.strategies.chef.progress import SlowProgress


def test_each_step_announces_its_removals_and_the_last_tries_them_all() -> None:
    """The search stops after a step in which no removal helped, so it tried every one of
    that step's removals; earlier steps stop at the first that helped (at most the total)."""
    steps: list[list[int]] = []
    numbers: list[int] = []  # each start (A2F's, H2H's) counts its steps from 1

    def progress(total: int | None = None, what: str | None = None) -> None:
        if what is not None:
            number = 1 if what == "step 1: removals" else numbers[-1] + 1
            assert what == f"step {number}: removals"
            numbers.append(number)
            steps.append([total, 0])
        else:
            steps[-1][1] += 1

    plan_chef(builtin_dag("cnn-lstm"), resolve_cluster("hacc"), ChefConfig(), progress)
    assert steps and all(0 <= tried <= total for total, tried in steps)
    assert steps[-1][0] == steps[-1][1]  # the last step of the last start tried them all
    assert any(total > 0 for total, _ in steps)


def test_the_bar_shows_the_steps_total_on_a_terminal(monkeypatch) -> None:
    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))
    bar = SlowProgress("CHEF search: x")
    bar.started -= 2  # a search past its first second
    bar(total=5, what="step 1: removals")
    bar()
    bar()
    (task,) = bar.bar.tasks
    assert (task.total, task.completed) == (5, 2)
    assert task.description == "CHEF search: x, step 1: removals"
    bar(total=3, what="step 2: removals")
    bar()
    (task,) = bar.bar.tasks
    assert (task.total, task.completed) == (3, 1)
    assert task.description == "CHEF search: x, step 2: removals"
    bar.close()


def test_steps_before_the_bar_shows_are_counted() -> None:
    bar = SlowProgress("x")
    bar(total=4, what="step")
    bar()
    assert (bar.stage, bar.done, bar.bar) == ((4, "step"), 1, None)
