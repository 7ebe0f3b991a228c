"""Reading a change of state and whom a text is about (`app.core.statechange`), pure."""

import pytest

from app.core.statechange import about, cues, restates, same_subject


@pytest.mark.parametrize("text", [
    "Heidi moved to Brooklyn last month.", "Nadia no longer works at Acme.", "The user wants Celsius from now on.",
    "Tom changed his number.", "Lucía se mudó a Valencia.", "Jonas arbeitet jetzt bei Bosch.",
    "Camille a changé de numéro.", "Ольгу повысили до старшего аналитика.", "王伟已经离开腾讯，现在在阿里巴巴上班。",
    "Mehmet geçen yıl Ankara'ya taşındı.", "佐藤さんは先月、東京に引っ越した。",
])
def test_a_change_of_state_is_read_in_many_languages(text):
    assert cues(text).change, text
    assert not cues(text).held, text


@pytest.mark.parametrize("text", [
    "Tom also has a work phone.", "Heidi is spending two weeks in Lisbon on holiday.", "The user grew up in Minneapolis.",
    "Priya used to work at Deloitte.", "Sam teaches a coding bootcamp on the side.", "Camille a aussi un numéro.",
    "Jonas hat früher bei Siemens gearbeitet.", "Раньше Ольга работала учительницей.", "Claire is in Tokyo this week.",
    "The user plans to run the Berlin Marathon next year.",
])
def test_a_state_beside_passing_or_past_is_held_not_changed(text):
    assert cues(text).held, text


def test_a_quoted_value_is_not_read_as_a_cue():
    assert not cues("The user goes by 'New Moon'.").change


def test_subjects_are_heads_possessors_and_family_roles_not_values():
    assert about("The user switched from VS Code to Neovim.").heads == {"user"}
    assert about("Olivia's work email changed.").heads == {"olivia"}
    assert about("Mom moved in with the user's brother.").heads >= {"mother", "brother"}
    assert "hendersons" in about("The house is owned by the Hendersons.").mentions


@pytest.mark.parametrize("new, old, same", [
    ("Heidi lives in Brooklyn now.", "Heidi lives in Oslo.", True),
    ("Heidi Larsen moved to Bergen.", "Heidi lives in Oslo.", True),
    ("Sarah Miller is the user's neighbour.", "Sarah Chen is the user's coworker.", False),
    ("The Hendersons sold the house to the Patels.", "The house is owned by the Hendersons.", True),
    ("She's now based in Lyon.", "Claire is based in Paris.", True),
    ("The user's sister now drives a Polo.", "The user drives a Golf.", False),
    ("Dad got a new number.", "The user's father's phone number is 020 7946 0018.", True),
    ("Ольгу повысили.", "Ольга работает аналитиком.", True),
    ("Rosa Mendes now runs a cooking school.", "Brightline Bakery is owned by Kim and Dae.", False),
])
def test_same_subject(new, old, same):
    assert same_subject(new, old) is same


def test_a_value_already_given_is_restated_not_changed():
    assert restates("The user now gets internet from Sonic.", "The user's internet is from Sonic.")
    assert restates("Ana now loves Lisbon's trams.", "Ana lives in Lisbon.")
    assert not restates("The user migrated from LastPass to 1Password.", "The user uses LastPass.")
    assert not restates("The user started eating meat again.", "The user is vegetarian.")  # names nothing


def test_a_relative_of_a_named_person_is_the_relative():
    assert about("Ana's sister now lives in Porto.").heads == {"sister"}
    assert not same_subject("Ana's sister now lives in Porto.", "Ana lives in Lisbon.")
