// IdSlotMap: EventId → slot index, an open-addressing hash map for HeapEventQueue's cancel().
//
// Algorithm: linear probing in a power-of-two table of (key, value) pairs, Fibonacci hashing,
// and backward-shift deletion (no tombstones), so lookups stay short however many events came
// and went. Keys are EventIds; kEmptyKey (UINT64_MAX) marks a free cell and is never a key.
// Complexity: insert/find/erase O(1) expected; the table doubles at load factor 1/2.
// Invariants: every key appears at most once; size() is the number of keys present; no
// allocation happens in steady state (the table only grows).
#pragma once

#include <cstdint>
#include <vector>

#include "base/check.h"

namespace ddpscope::sim {

class IdSlotMap {
 public:
  static constexpr uint64_t kEmptyKey = UINT64_MAX;
  static constexpr uint32_t kNotFound = UINT32_MAX;

  IdSlotMap() { rehash(16); }

  size_t size() const { return m_size; }

  void reserve(size_t keys) {
    size_t cap = m_cells.size();
    while (cap < keys * 2) cap *= 2;
    if (cap != m_cells.size()) rehash(cap);
  }

  // Inserts a key that is not present.
  void insert(uint64_t key, uint32_t value) {
    DDPSCOPE_CHECK(key != kEmptyKey);
    if ((m_size + 1) * 2 > m_cells.size()) rehash(m_cells.size() * 2);
    size_t i = home(key);
    while (m_cells[i].key != kEmptyKey) {
      DDPSCOPE_CHECK(m_cells[i].key != key);
      i = (i + 1) & m_mask;
    }
    m_cells[i] = Cell{key, value};
    ++m_size;
  }

  // The value stored for `key`, or kNotFound.
  uint32_t find(uint64_t key) const {
    for (size_t i = home(key);; i = (i + 1) & m_mask) {
      if (m_cells[i].key == key) return m_cells[i].value;
      if (m_cells[i].key == kEmptyKey) return kNotFound;
    }
  }

  // Removes `key`; returns false when it was not present.
  bool erase(uint64_t key) {
    size_t i = home(key);
    while (m_cells[i].key != key) {
      if (m_cells[i].key == kEmptyKey) return false;
      i = (i + 1) & m_mask;
    }
    // Backward shift: pull later cells of the probe run into the hole when their home allows.
    for (size_t j = (i + 1) & m_mask; m_cells[j].key != kEmptyKey; j = (j + 1) & m_mask) {
      const size_t h = home(m_cells[j].key);
      // Cell j may move to hole i iff its home is not cyclically within (i, j].
      const bool homeInHoleToJ = (i <= j) ? (h > i && h <= j) : (h > i || h <= j);
      if (!homeInHoleToJ) {
        m_cells[i] = m_cells[j];
        i = j;
      }
    }
    m_cells[i].key = kEmptyKey;
    --m_size;
    return true;
  }

 private:
  struct Cell {
    uint64_t key = kEmptyKey;
    uint32_t value = 0;
  };

  size_t home(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ULL) >> m_shift);
  }

  void rehash(size_t capacity) {
    std::vector<Cell> old;
    old.swap(m_cells);
    m_cells.assign(capacity, Cell{});
    m_mask = capacity - 1;
    m_shift = 64;
    for (size_t c = capacity; c > 1; c >>= 1) --m_shift;
    m_size = 0;
    for (const Cell& cell : old) {
      if (cell.key != kEmptyKey) insert(cell.key, cell.value);
    }
  }

  std::vector<Cell> m_cells;
  size_t m_mask = 0;
  int m_shift = 64;
  size_t m_size = 0;
};

}  // namespace ddpscope::sim
