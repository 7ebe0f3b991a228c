"""Hidden characters in memory text become visible markers for reviewers (pure)."""

from app.core.diff import reveal_hidden


def test_pieces_join_back_to_the_text_and_only_hidden_characters_are_marked():
    text = "Plain\tline\nnext \u00e9\u4e2d\U0001f600 a\u200bb\u200dc\u202ed\u2066e\ufeff\U000e0068\U000e0069!\u0007\u3164\U000e0101"
    pieces = reveal_hidden(text)
    assert "".join(piece for piece, _ in pieces) == text
    assert [marker for _, marker in pieces if marker] == [
        "⟨ZWSP⟩", "⟨ZWJ⟩", "⟨U+202E⟩", "⟨U+2066⟩", "⟨BOM⟩", "⟨TAG hi⟩", "⟨U+0007⟩", "⟨U+3164⟩", "⟨U+E0101⟩"]
    assert pieces[0] == ("Plain\tline\nnext \u00e9\u4e2d\U0001f600 a", None)  # tabs, newlines, accents, CJK, emoji stay


def test_plain_text_is_one_unmarked_piece():
    assert reveal_hidden("Alice likes tea.") == [("Alice likes tea.", None)]
    assert reveal_hidden("") == []
