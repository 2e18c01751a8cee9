"""The store contract: the same assertions against the memory, SQLite and PostgreSQL stores."""

import threading
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plantstore.api.schemas import INT64_MAX, INT64_MIN, MAX_PAGE_BYTES, PlantSchema
from plantstore.core.plants import ConditionFailed, Page, Put, stored_plant
from plantstore.core.stores import PlantStore
from plantstore.stores import open_store
from plantstore.stores.memory import MemoryStore
from tests.support.concurrency import at_once
from tests.support.pages import expected_page
from tests.support.settled import pool_of

FERN = b'{"name":"fern"}'
ROSE = b'{"name":"rose","tag":"red"}'
#: Threads racing on one id cost seconds of CPU on SQLite: those runs are in the slow set; on
#: the memory and PostgreSQL stores they take a second at most.
SLOW_ON_SQLITE = pytest.param("sqlite", marks=pytest.mark.slow)
racing = pytest.mark.parametrize("store_url", ["memory", SLOW_ON_SQLITE, "postgres"], indirect=True)


def document(name: str, tag: str | None = None) -> bytes:
    """The plant as the service keeps it: its `Plant` body, as orjson writes it."""
    plant = {"name": name} if tag is None else {"name": name, "tag": tag}
    return orjson.dumps(PlantSchema().dump(plant))


def test_add_keeps_the_first_plant_under_an_id(any_store):
    assert any_store.add(1, FERN) == FERN
    assert any_store.add(1, ROSE) == FERN
    assert any_store.add(2, ROSE) == ROSE
    assert any_store.add(1, FERN) == FERN


@pytest.mark.parametrize("plant_id", [INT64_MIN, -1, 0, 1, INT64_MAX])
def test_every_int64_is_an_id_of_its_own(any_store, plant_id):
    assert any_store.add(plant_id, FERN) == FERN
    assert any_store.add(plant_id, ROSE) == FERN
    assert any_store.add(plant_id ^ 1, ROSE) == ROSE


@pytest.mark.parametrize(
    "text",
    [
        "\u0000",
        "Fußnote 🌿 日本 \u2028\u2029",
        "\ufeffbom",
        "עברית and العربية",
        "e\u0301 \U0010ffff",
        "'); DROP TABLE plants; --",
        '\\"quoted\\" \\\\ back',
        "x" * 60_000,
    ],
)
def test_any_unicode_comes_back_byte_for_byte(any_store, text):
    plant = document(text, tag=text)
    assert any_store.add(7, plant) == plant
    assert any_store.add(7, document(text)) == plant
    assert any_store.add(7, plant) == plant


def contend_for_one_id(add_for: Callable[[int], Callable[[int, bytes], bytes]]) -> None:
    """Let 16 threads add a plant of their own under one id at once; assert one won for all.

    Thread `n` adds through `add_for(n)`, so that contenders may use stores of their own.
    """
    plants = [document(f"plant-{n}") for n in range(16)]
    kept = at_once(len(plants), lambda n: add_for(n)(42, plants[n]))

    winners = [plant for plant, answer in zip(plants, kept, strict=True) if plant == answer]
    assert len(winners) == 1
    assert set(kept) == set(winners)


def test_concurrent_adds_of_one_id_have_one_winner(any_store):
    contend_for_one_id(lambda n: any_store.add)


def test_get_answers_what_the_id_holds(any_store):
    assert any_store.get(1) is None
    any_store.add(1, ROSE)
    assert any_store.get(1) == ROSE
    assert any_store.get(2) is None
    assert any_store.get(INT64_MIN) is None


def test_delete_tells_whether_there_was_a_plant_and_frees_the_id(any_store):
    any_store.add(1, ROSE)
    any_store.add(2, FERN)
    assert any_store.delete(1) is True
    assert any_store.delete(1) is False
    assert any_store.delete(3) is False
    assert any_store.get(1) is None
    assert any_store.page(None, 10, None, MAX_PAGE_BYTES).plants == [(2, FERN)]
    assert any_store.page(None, 10, "red", MAX_PAGE_BYTES).plants == []
    assert any_store.add(1, FERN) == FERN
    assert any_store.get(1) == FERN
    assert any_store.page(None, 10, None, MAX_PAGE_BYTES).plants == [(1, FERN), (2, FERN)]


def page_ids(page: Page, after: int | None, limit: int) -> list[int]:
    """The ids on `page`, read after `after` with `limit`, asserted to be what any page must hold
    whatever other threads do meanwhile: the next page starts after the last of them, so ids out
    of order, or at or below `after`, would make a walk repeat or skip plants."""
    ids = [plant_id for plant_id, _ in page.plants]
    assert len(ids) <= limit, f"{len(ids)} plants on a page of {limit}"
    assert all(a < b for a, b in pairwise(ids)), f"a page's ids do not ascend: {ids}"
    assert after is None or not ids or ids[0] > after, f"a page after {after} holds {ids}"
    return ids


def walk_pages(
    store: PlantStore,
    held: int,
    limit: int,
    tag: str | None = None,
    max_bytes: int = MAX_PAGE_BYTES,
) -> list[list[tuple[int, bytes]]]:
    """The pages from the first, each starting after the last id of the one before, up to the
    first that is not full, from a store holding `held` plants that match `tag`.

    Every page but the last holds one of them at least, each above those before, so `held + 1`
    pages end a walk: a store that gives a full page again, or calls an empty one full, fails
    at that page, and any other walk that would not end fails at the bound, not hanging the run.
    """
    pages, after = [], None
    for _ in range(held + 1):
        page = store.page(after, limit, tag, max_bytes)
        ids = page_ids(page, after, limit)
        pages.append(page.plants)
        if not page.full:
            return pages
        assert ids, f"an empty page after {after} says more may follow"
        after = ids[-1]
    pytest.fail(f"{held + 1} pages did not end a walk of {held} plants")


def walk(store: PlantStore, held: int, *read: int | str | None) -> list[tuple[int, bytes]]:
    """Every plant the pages of `walk_pages` give, read with its `limit`, `tag` and `max_bytes`."""
    return [pair for page in walk_pages(store, held, *read) for pair in page]


EDGE_IDS = [INT64_MIN, INT64_MIN + 1, -2, 0, 1, 2**31, INT64_MAX - 1, INT64_MAX]


@pytest.mark.parametrize("limit", [1, 2, 3, 100])
def test_pages_walk_every_plant_in_id_order(any_store, limit):
    plants = {plant_id: document(f"plant {plant_id}") for plant_id in EDGE_IDS}
    for plant_id in reversed(EDGE_IDS):
        any_store.add(plant_id, plants[plant_id])
    assert walk(any_store, len(plants), limit) == sorted(plants.items())


@pytest.mark.parametrize(
    "after", [INT64_MIN, INT64_MIN + 1, -1, 0, 2**31, INT64_MAX - 1, INT64_MAX]
)
def test_a_page_holds_the_ids_above_after(any_store, after):
    for plant_id in EDGE_IDS:
        any_store.add(plant_id, document(f"plant {plant_id}", tag="t"))
    above = [plant_id for plant_id in EDGE_IDS if plant_id > after]
    for tag in (None, "t"):
        assert [
            plant_id for plant_id, _ in any_store.page(after, 100, tag, MAX_PAGE_BYTES).plants
        ] == above
        assert [
            plant_id for plant_id, _ in any_store.page(after, 2, tag, MAX_PAGE_BYTES).plants
        ] == above[:2]
    assert [
        plant_id for plant_id, _ in any_store.page(None, 2, None, MAX_PAGE_BYTES).plants
    ] == EDGE_IDS[:2]


#: Plants of many sizes, from a few bytes to 20 KB, so that pages are cut after any of them.
SIZED = {
    plant_id: document("x" * size, tag="t" if plant_id % 2 else None)
    for plant_id, size in enumerate([0, 300, 50, 20_000, 5, 5, 2_000, 40, 70, 3, 1_000, 9])
}


@pytest.mark.parametrize("max_bytes", [0, 1, 60, 300, 1_100, 3_000, 25_000, 100_000])
@pytest.mark.parametrize("limit", [1, 3, 100])
def test_a_page_fits_in_its_bytes_but_holds_one_plant_at_least(any_store, limit, max_bytes):
    for plant_id, plant in SIZED.items():
        any_store.add(plant_id, plant)
    for tag in (None, "t"):
        chosen = [(n, plant) for n, plant in SIZED.items() if tag is None or n % 2]
        for start in range(len(chosen)):
            after = chosen[start - 1][0] if start else None
            page = any_store.page(after, limit, tag, max_bytes)
            plants, full = expected_page(chosen[start:], limit, max_bytes)
            assert page == (plants, full)
            # What the service answers for it: never more than the bytes allowed, but a plant.
            answered = sum(len(stored_plant(*pair)) for pair in page.plants)
            assert answered <= max_bytes or len(page.plants) == 1
        assert walk(any_store, len(chosen), limit, tag, max_bytes) == chosen


def test_a_page_of_plants_larger_than_its_bytes_holds_one_each(any_store):
    for plant_id, plant in SIZED.items():
        any_store.add(plant_id, plant)
    assert walk_pages(any_store, len(SIZED), 100, None, 0) == [[pair] for pair in SIZED.items()]


def test_a_page_of_large_plants_reads_little_more_than_it_answers(any_store):
    """A store must not read every plant up to `limit` only to drop those that do not fit:
    a worker's memory then grows with `limit` times the largest plant."""
    big = document("x" * 40_000)
    for plant_id in range(100):
        any_store.add(plant_id, big)
    max_bytes = 200_000
    tracemalloc.start()
    try:
        page = any_store.page(None, 100, None, max_bytes)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [plant_id for plant_id, _ in page.plants] == [0, 1, 2, 3]
    assert page.full
    # The page and a few plants more, in Python objects; not the 100 plants' 4 MB.
    assert peak < 2 * max_bytes + 10 * len(big)


TAGS = ["\u0000", "a\u0000b", "a", "", " ", "A", "Fußnote 🌿", "e\u0301", "é", "日本", "x" * 5000]


def test_a_tag_matches_exactly_that_tag(any_store):
    """Each tag on three plants, and plants without a tag; `\\u0000` ends no tag early."""
    tagged: dict[str, list[tuple[int, bytes]]] = {tag: [] for tag in TAGS}
    plant_id = INT64_MIN
    for n in range(3):
        for tag in TAGS:
            plant = document(f"{tag} {n}", tag)
            any_store.add(plant_id, plant)
            tagged[tag].append((plant_id, plant))
            any_store.add(plant_id + 1, document(tag))
            plant_id += 1000
    for tag, plants in tagged.items():
        assert any_store.page(None, 10, tag, MAX_PAGE_BYTES).plants == plants
        assert walk(any_store, len(plants), 1, tag) == plants
        assert any_store.page(plants[0][0], 10, tag, MAX_PAGE_BYTES).plants == plants[1:]
    assert any_store.page(None, 10, "b", MAX_PAGE_BYTES).plants == []
    assert any_store.page(None, 10, "null", MAX_PAGE_BYTES).plants == []


def test_a_plant_without_a_tag_matches_no_tag(any_store):
    for plant_id, name in enumerate(["", "null", "None", "\u0000"]):
        any_store.add(plant_id, document(name))
    for tag in ["", "null", "None", "\u0000"]:
        assert any_store.page(None, 10, tag, MAX_PAGE_BYTES).plants == []
    assert len(any_store.page(None, 10, None, MAX_PAGE_BYTES).plants) == 4


def test_a_store_that_can_serve_is_ready(any_store):
    assert any_store.check_ready() is None


def listed(store: PlantStore, tag: str | None = None) -> list[tuple[int, bytes]]:
    """Every plant a page of the store's index gives, of `tag` when it is given."""
    return store.page(None, 1000, tag, MAX_PAGE_BYTES).plants


def test_put_keeps_a_plant_under_a_free_id(any_store):
    assert any_store.put(1, ROSE) == (Put.CREATED, ROSE)
    assert any_store.put(INT64_MIN, FERN) == (Put.CREATED, FERN)
    assert any_store.get(1) == ROSE
    assert listed(any_store) == [(INT64_MIN, FERN), (1, ROSE)]
    assert listed(any_store, "red") == [(1, ROSE)]
    assert any_store.add(1, FERN) == ROSE


def test_put_replaces_the_plant_in_every_index(any_store):
    tulip = document("tulip", "red")
    white = document("rose", "white")
    any_store.add(1, ROSE)
    any_store.add(2, tulip)
    assert any_store.put(1, white) == (Put.REPLACED, white)
    assert any_store.get(1) == white
    assert listed(any_store) == [(1, white), (2, tulip)]
    assert listed(any_store, "red") == [(2, tulip)]
    assert listed(any_store, "white") == [(1, white)]
    # The whole plant is replaced: one without a tag is in no tag's index.
    assert any_store.put(1, FERN) == (Put.REPLACED, FERN)
    assert listed(any_store, "white") == []
    assert listed(any_store) == [(1, FERN), (2, tulip)]
    # Under the same tag, the plant is listed once, as it now is.
    renamed = document("tulip 2", "red")
    assert any_store.put(2, renamed) == (Put.REPLACED, renamed)
    assert listed(any_store, "red") == [(2, renamed)]
    assert any_store.add(2, tulip) == renamed


@pytest.mark.parametrize(
    ("kept", "plant"),
    [
        (ROSE, ROSE),
        (b'{"tag":"a","name":"x"}', b'{"name":"x","tag":"a"}'),
        (b'{"name":"\\u0078"}', b'{"name":"x"}'),
    ],
)
def test_put_of_the_same_plant_leaves_it_as_kept(any_store, kept, plant):
    """Equal as JSON is the same plant, however spelled: the kept bytes stay, and are answered."""
    any_store.add(1, kept)
    assert any_store.put(1, plant) == (Put.UNCHANGED, kept)
    assert any_store.put(1, plant, lambda held: held == kept) == (Put.UNCHANGED, kept)
    assert any_store.get(1) == kept
    assert listed(any_store) == [(1, kept)]


class Asked:
    """A condition that answers `holds`, and remembers what it was asked of."""

    def __init__(self, holds: bool) -> None:
        self.holds = holds
        self.asked: list[bytes | None] = []

    def __call__(self, kept: bytes | None) -> bool:
        self.asked.append(kept)
        return self.holds


def test_a_condition_is_asked_of_what_the_id_holds(any_store):
    for call, held in [
        (lambda condition: any_store.put(1, ROSE, condition), None),
        (lambda condition: any_store.put(1, FERN, condition), ROSE),
        (lambda condition: any_store.put(1, FERN, condition), FERN),
        (lambda condition: any_store.delete(1, condition), FERN),
        (lambda condition: any_store.delete(1, condition), None),
    ]:
        refused = Asked(holds=False)
        with pytest.raises(ConditionFailed):
            call(refused)
        assert any_store.get(1) == held
        allowed = Asked(holds=True)
        call(allowed)
        assert refused.asked == allowed.asked == [held]


def test_a_condition_that_fails_changes_nothing(any_store):
    any_store.add(1, ROSE)
    any_store.add(2, FERN)
    never = Asked(holds=False)
    for call in [
        lambda: any_store.put(1, FERN, never),
        lambda: any_store.put(1, ROSE, never),
        lambda: any_store.put(3, ROSE, never),
        lambda: any_store.delete(1, never),
        lambda: any_store.delete(3, never),
    ]:
        with pytest.raises(ConditionFailed):
            call()
    assert [any_store.get(plant_id) for plant_id in (1, 2, 3)] == [ROSE, FERN, None]
    assert listed(any_store) == [(1, ROSE), (2, FERN)]
    assert listed(any_store, "red") == [(1, ROSE)]
    # Nothing is left locked or half made: a change from another thread goes through.
    white = document("rose", "white")
    assert at_once(1, lambda n: any_store.put(1, white, lambda kept: kept == ROSE)) == [
        (Put.REPLACED, white)
    ]
    assert any_store.put(3, ROSE, lambda kept: kept is None) == (Put.CREATED, ROSE)


def test_a_conditional_delete_deletes_only_what_its_condition_allows(any_store):
    any_store.add(1, ROSE)
    with pytest.raises(ConditionFailed):
        any_store.delete(1, lambda kept: kept == FERN)
    assert any_store.get(1) == ROSE
    assert any_store.delete(1, lambda kept: kept == ROSE) is True
    assert any_store.get(1) is None
    assert listed(any_store) == listed(any_store, "red") == []
    with pytest.raises(ConditionFailed):
        any_store.delete(1, lambda kept: kept is not None)
    assert any_store.delete(1, lambda kept: kept is None) is False


@racing
def test_a_replace_is_never_seen_half_made(any_store):
    """A reader during a replace finds the plant as it was or as it becomes: never no plant,
    which would tell a client that a renamed plant was deleted."""
    plants = [document("rose", "red"), document("rose", "white")]
    any_store.add(1, plants[0])
    replaced = threading.Event()

    def replace_or_read(n: int) -> list[object]:
        if n == 0:
            for r in range(400):
                any_store.put(1, plants[(r + 1) % 2])
            replaced.set()
            return []
        reads = []
        while not (reads and replaced.is_set()):
            if n % 2:
                reads.append(any_store.get(1))
            else:
                reads.append(any_store.page(None, 10, None, MAX_PAGE_BYTES).plants)
        return reads

    reads = [read for reader in at_once(6, replace_or_read) for read in reader]
    allowed = [*plants, *([(1, plant)] for plant in plants)]
    assert [read for read in reads if read not in allowed] == []


def compare_and_set(stores: Sequence[PlantStore], rounds: int = 40, contenders: int = 8) -> None:
    """Let threads each read one id, then change it on the condition that it still holds what
    they read, all at once, round after round; assert exactly one of them changes it each round.

    A round on a free id is a race of creates; on a taken one, some contenders delete the plant
    and the others replace it, and the id ends holding what the winner left.
    """
    plant_id = 42
    for r in range(rounds):
        read_all = threading.Barrier(contenders)

        def contend(n: int, r: int = r, read_all: threading.Barrier = read_all) -> object:
            store = stores[n % len(stores)]
            read = store.get(plant_id)
            read_all.wait()  # no change before every contender has read
            try:
                if read is not None and (n + r) % 4 == 0:
                    return store.delete(plant_id, lambda kept: kept == read)
                plant = document(f"plant {r} {n}", tag="tree")
                return store.put(plant_id, plant, lambda kept: kept == read)
            except ConditionFailed:
                return None

        held = stores[0].get(plant_id)
        answers = at_once(contenders, contend)
        winners = [n for n, answer in enumerate(answers) if answer is not None]
        assert len(winners) == 1, answers
        (winner,) = winners
        if answers[winner] is True:
            assert held is not None
            expected = None
        else:
            expected = document(f"plant {r} {winner}", tag="tree")
            done = Put.CREATED if held is None else Put.REPLACED
            assert answers[winner] == (done, expected)
        for store in stores:
            assert store.get(plant_id) == expected
        pairs = [] if expected is None else [(plant_id, expected)]
        assert listed(stores[0]) == listed(stores[0], "tree") == pairs


def test_of_changes_each_on_what_it_read_one_wins(any_store):
    compare_and_set([any_store])


new_plants = st.tuples(
    st.integers(min_value=INT64_MIN, max_value=INT64_MAX) | st.integers(min_value=0, max_value=5),
    st.text(),
    st.none() | st.text(),
)


@pytest.fixture
def model():
    """What every store must answer: the memory store, the simplest that keeps the contract."""
    return MemoryStore()


@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
def test_the_postgresql_store_of_property_tests_has_no_connection_left_to_make(any_store):
    """Calls one at a time take the one connection its pool opened with: the pool makes no
    other, whose use of `random` hypothesis would see while it draws
    (`tests/support/settled.py`)."""
    for plant_id in range(3):
        any_store.add(plant_id, document("fern"))
        assert any_store.get(plant_id) == document("fern")
    assert pool_of(any_store).get_stats()["pool_size"] == 1


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(requests=st.lists(new_plants, max_size=8))
def test_every_store_answers_a_sequence_of_adds_as_the_model_does(any_store, model, requests):
    """Any valid plants, whatever unicode they hold, with ids that often repeat.

    The store and the model live for the whole test, so later examples meet earlier plants.
    """
    for plant_id, name, tag in requests:
        plant = document(name, tag)
        assert any_store.add(plant_id, plant) == model.add(plant_id, plant)


ids = st.integers(min_value=INT64_MIN, max_value=INT64_MAX) | st.integers(min_value=0, max_value=5)
tags = st.none() | st.sampled_from(["", "a", "a\u0000b", "\u0000"]) | st.text()


def spelled(name: str, tag: str | None, tag_first: bool) -> bytes:
    """A plant document as the service writes it, or with its tag first, as another JSON
    library may have written the same plant."""
    if tag is None or not tag_first:
        return document(name, tag)
    return orjson.dumps({"tag": tag, "name": name})


#: A few plants, spelled either way, so that a change meets the very plant it expects.
few_plants = st.builds(
    spelled, st.sampled_from(["a", "b"]), st.sampled_from([None, "a"]), st.booleans()
)
plants = few_plants | st.builds(spelled, st.text(), tags, st.booleans())


def is_free(kept: bytes | None) -> bool:
    """`If-None-Match: *`: the id holds nothing."""
    return kept is None


def is_taken(kept: bytes | None) -> bool:
    """`If-Match: *`: the id holds a plant."""
    return kept is not None


@dataclass(frozen=True)
class Holds:
    """`If-Match` with a plant's ETag: the id holds that plant, byte for byte."""

    plant: bytes | None

    def __call__(self, kept: bytes | None) -> bool:
        return kept == self.plant


#: The condition that the id holds what a get of it answered just before the call, as a client
#: sends the ETag it read: the test makes it `Holds` that.
AS_READ = "as read"
conditions = (
    st.none() | st.sampled_from([is_free, is_taken, AS_READ]) | st.builds(Holds, few_plants)
)
operations = st.lists(
    st.tuples(st.just("add"), ids, plants)
    | st.tuples(st.just("put"), ids, plants, conditions)
    | st.tuples(st.just("delete"), ids, conditions)
    | st.tuples(st.just("get"), ids)
    | st.tuples(
        st.just("page"),
        st.none() | ids,
        st.integers(min_value=1, max_value=4),
        tags,
        st.integers(min_value=0, max_value=120) | st.just(MAX_PAGE_BYTES),
    ),
    max_size=12,
)


def answer(store: PlantStore, name: str, arguments: list) -> object:
    """What the store answers to a call: what it returns, or `ConditionFailed` if it raises it."""
    try:
        return getattr(store, name)(*arguments)
    except ConditionFailed:
        return ConditionFailed


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(requests=operations)
def test_every_store_answers_a_sequence_of_any_calls_as_the_model_does(any_store, model, requests):
    """Adds, puts and deletes on conditions or none, gets, and pages, some cut short by their
    bytes; the store and the model live for the whole test."""
    for name, *arguments in requests:
        if name in ("put", "delete") and arguments[-1] == AS_READ:
            arguments[-1] = Holds(model.get(arguments[0]))
        assert answer(any_store, name, arguments) == answer(model, name, arguments)
    everything = (None, 1000, None, MAX_PAGE_BYTES)
    assert any_store.page(*everything) == model.page(*everything)


def race_adds_and_deletes(stores: Sequence[PlantStore], rounds: int = 40) -> None:
    """Let 12 threads add and delete plants of 2 ids at once while 6 more page through them;
    assert some serial order explains it.

    Each add keeps a plant of its own, or answers a plant another add kept; per id, the adds that
    kept theirs and the deletes that found one alternate, so the id ends holding a plant exactly
    when there was one more of the former, and then one of theirs. Each page read meanwhile holds
    ids above its `after`, in ascending order, each with a plant an add kept.
    """
    plant_ids = (7, INT64_MIN)
    writers, readers = 12, 6
    # From the first id, after the first, after a point between them; cut by `limit` or not.
    reads = [
        (after, limit, tag)
        for after in (None, INT64_MIN, 0)
        for limit in (1, 10)
        for tag in (None, "tree")
    ]
    written = threading.Event()
    writing = threading.Barrier(writers, action=written.set)

    def write(n: int, store: PlantStore) -> list[tuple[str, int, bytes | None, object]]:
        calls = []
        try:
            for r in range(rounds):
                plant_id = plant_ids[(n + r) % len(plant_ids)]
                if (n + r // 2) % 3:
                    plant = document(f"plant {n} {r}", tag="tree")
                    calls.append(("add", plant_id, plant, store.add(plant_id, plant)))
                else:
                    calls.append(("delete", plant_id, None, store.delete(plant_id)))
        finally:
            writing.wait()  # even after a failure, so that the readers stop
        return calls

    def read(n: int, store: PlantStore) -> list[tuple[int | None, int, Page]]:
        """Page for as long as the writers write, so that a store that lets a page meet a change
        half made shows it."""
        pages = []
        while not (pages and written.is_set()):
            after, limit, tag = reads[(n + len(pages)) % len(reads)]
            pages.append((after, limit, store.page(after, limit, tag, MAX_PAGE_BYTES)))
        return pages

    def contend(n: int) -> list[tuple]:
        store = stores[n % len(stores)]
        return write(n, store) if n < writers else read(n, store)

    contenders = at_once(writers + readers, contend)
    calls = [call for contender in contenders[:writers] for call in contender]
    kept = {
        (plant_id, plant)
        for name, plant_id, plant, answer in calls
        if name == "add" and answer == plant
    }
    for name, plant_id, _, answer in calls:
        if name == "add":
            assert (plant_id, answer) in kept
    for pages in contenders[writers:]:
        for after, limit, page in pages:
            page_ids(page, after, limit)
            assert set(page.plants) <= kept, f"a page holds plants no add kept: {page.plants}"
    balance = Counter(plant_id for plant_id, _ in kept)
    balance.subtract(plant_id for name, plant_id, _, answer in calls if answer is True)
    for plant_id in plant_ids:
        assert balance[plant_id] in (0, 1)
        held = stores[0].get(plant_id)
        assert (held is not None) == (balance[plant_id] == 1)
        assert held is None or (plant_id, held) in kept
    held_ids = sorted(plant_id for plant_id in plant_ids if stores[0].get(plant_id) is not None)
    assert [
        plant_id for plant_id, _ in stores[0].page(None, 10, None, MAX_PAGE_BYTES).plants
    ] == held_ids
    assert [
        plant_id for plant_id, _ in stores[0].page(None, 10, "tree", MAX_PAGE_BYTES).plants
    ] == held_ids


@racing
def test_concurrent_adds_and_deletes_of_an_id_follow_some_serial_order(any_store):
    race_adds_and_deletes([any_store])


shared = pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)


@shared
def test_plants_outlive_the_store_that_kept_them(store_url):
    first = open_store(store_url)
    first.add(1, FERN)
    first.close()
    again = open_store(store_url)
    try:
        assert again.add(1, ROSE) == FERN
    finally:
        again.close()


@shared
def test_stores_on_one_database_agree_on_one_winner(store_url):
    """As gunicorn's processes do: each has a store of its own on the same database."""
    stores = [open_store(store_url) for _ in range(4)]
    try:
        contend_for_one_id(lambda n: stores[n % len(stores)].add)
    finally:
        for store in stores:
            store.close()


@pytest.mark.parametrize("store_url", [SLOW_ON_SQLITE, "postgres"], indirect=True)
def test_stores_on_one_database_add_and_delete_in_some_serial_order(store_url):
    stores = [open_store(store_url) for _ in range(4)]
    try:
        race_adds_and_deletes(stores)
    finally:
        for store in stores:
            store.close()


@shared
def test_stores_on_one_database_let_one_change_on_what_each_read_win(store_url):
    stores = [open_store(store_url) for _ in range(4)]
    try:
        compare_and_set(stores)
    finally:
        for store in stores:
            store.close()
