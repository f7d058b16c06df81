//! Entries under small reusable indexes: the loop's tasks and its sockets (an epoll
//! event's token and a waker's task are such an index).

/// Values at stable indexes; a removed entry's index is reused by the next insert.
pub(super) struct Slab<T> {
    entries: Vec<Option<T>>,
    free: Vec<usize>,
    len: usize,
}

impl<T> Slab<T> {
    pub(super) const fn new() -> Slab<T> {
        Slab {
            entries: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }

    /// The index the next [`Slab::insert`] will use.
    pub(super) fn next_index(&self) -> usize {
        self.free.last().copied().unwrap_or(self.entries.len())
    }

    /// Stores `value`, at [`Slab::next_index`].
    pub(super) fn insert(&mut self, value: T) -> usize {
        self.len += 1;
        match self.free.pop() {
            Some(i) => {
                self.entries[i] = Some(value);
                i
            }
            None => {
                self.entries.push(Some(value));
                self.entries.len() - 1
            }
        }
    }

    pub(super) fn get(&self, index: usize) -> Option<&T> {
        self.entries.get(index).and_then(Option::as_ref)
    }

    /// Takes the value at `index` out, if there is one.
    pub(super) fn remove(&mut self, index: usize) -> Option<T> {
        let value = self.entries.get_mut(index)?.take()?;
        self.free.push(index);
        self.len -= 1;
        Some(value)
    }

    /// Values held.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Takes every value out.
    pub(super) fn take_all(&mut self) -> Vec<T> {
        self.free.clear();
        self.len = 0;
        self.entries.drain(..).flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_are_reused_and_counted() {
        let mut s = Slab::new();
        assert_eq!(s.next_index(), 0);
        assert_eq!(s.insert('a'), 0);
        assert_eq!(s.insert('b'), 1);
        assert_eq!(s.remove(0), Some('a'));
        assert_eq!(s.remove(0), None, "removed once");
        assert_eq!(s.len(), 1);
        assert_eq!(s.next_index(), 0);
        assert_eq!(s.insert('c'), 0);
        assert_eq!(s.get(0), Some(&'c'));
        assert_eq!(s.get(7), None);
        assert_eq!(s.take_all(), vec!['c', 'b']);
        assert_eq!((s.len(), s.next_index()), (0, 0));
    }
}
