"""Content digests that key the dashboard's shared cache: equal content, equal key."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ui.cache import digest, labels_digest


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "setup": ["a", "b"],
            "k": pd.array([2, None], dtype="Int32"),
            "speedup": [1.5, np.nan],
            "per_position_acceptance": [np.array([0.7, 0.5]), None],
        }
    )


def test_equal_content_built_twice_has_one_digest():
    assert digest(_frame(), ["a"], 3) == digest(_frame().copy(), ["a"], 3)


def test_any_changed_cell_or_option_changes_the_digest():
    base = digest(_frame(), ["a"])
    changed_list = _frame()
    changed_list.at[0, "per_position_acceptance"] = np.array([0.7, 0.4])
    changed_number = _frame()
    changed_number.loc[1, "speedup"] = 0.9
    assert (
        len(
            {
                base,
                digest(changed_list, ["a"]),
                digest(changed_number, ["a"]),
                digest(_frame(), ["b"]),
                digest(_frame().iloc[:1], ["a"]),
            }
        )
        == 5
    )


def test_a_subset_digests_alike_by_its_labels_and_repeated_labels_fall_back_to_the_rows():
    whole = pd.concat([_frame(), _frame().assign(setup=["c", "d"])], ignore_index=True)
    rows = whole.loc[[1, 3]]
    assert labels_digest(whole, rows.index) == labels_digest(whole.copy(), rows.index)  # content, not identity
    assert labels_digest(whole, rows.index) == labels_digest(whole.iloc[::-1], rows.index)  # whatever else is there
    assert labels_digest(whole, rows.index) != labels_digest(whole, whole.loc[[1, 2]].index)
    repeated = whole.set_axis([0, 0, 1, 1])  # labels that do not name one row each
    assert labels_digest(repeated, pd.Index([0])) == digest(repeated.loc[[0]])
    assert labels_digest(repeated, pd.Index([0])) != labels_digest(repeated, pd.Index([1]))


def test_a_row_digests_anew_when_any_of_its_cells_changes_and_only_then():
    whole = pd.concat([_frame(), _frame().assign(setup=["c", "d"])], ignore_index=True)
    before = {label: labels_digest(whole, pd.Index([label])) for label in whole.index}
    changed = whole.copy()
    changed.loc[2, "speedup"] = 1.5000000001  # a number
    changed.at[3, "per_position_acceptance"] = np.array([0.1])  # a list
    after = {label: labels_digest(changed, pd.Index([label])) for label in changed.index}
    assert [before[label] == after[label] for label in whole.index] == [True, True, False, False]
    # the same bytes read as another type are other content
    floats = pd.DataFrame({"x": np.array([1.0])})
    ints = pd.DataFrame({"x": np.array([1.0]).view(np.int64)})
    assert labels_digest(floats, floats.index) != labels_digest(ints, ints.index)
