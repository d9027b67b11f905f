//! A list of at most `N` items kept inline (on the stack), for the per-key parts of an
//! `RL.ALL` call (its limits, replies and changes): a call judges at most 16 keys, so its hot
//! path needs no heap allocation. Safe code only: an empty place is a `None`.

/// At most `N` items, in the order pushed.
#[derive(Debug, Clone)]
pub struct Bounded<T, const N: usize> {
    items: [Option<T>; N],
    len: usize,
}

impl<T, const N: usize> Bounded<T, N> {
    /// An empty list. Built element by element: that writes only the `N` empty markers, where
    /// an array constant would be copied whole (kilobytes for the larger items).
    #[inline]
    pub fn new() -> Self {
        Bounded { items: std::array::from_fn(|_| None), len: 0 }
    }

    /// Appends `item`; gives it back when the list is full.
    pub fn push(&mut self, item: T) -> Result<(), T> {
        match self.items.get_mut(self.len) {
            Some(place) => {
                *place = Some(item);
                self.len += 1;
                Ok(())
            }
            None => Err(item),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `i`-th item (0-based), if there is one.
    pub fn get(&self, i: usize) -> Option<&T> {
        self.items.get(i).and_then(Option::as_ref)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + Clone {
        self.filled().iter().flatten()
    }

    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut T> {
        let len = self.len;
        self.items.get_mut(..len).unwrap_or_default().iter_mut().flatten()
    }

    /// The places pushed so far (all `Some`).
    fn filled(&self) -> &[Option<T>] {
        self.items.get(..self.len).unwrap_or_default()
    }

    pub fn to_vec(&self) -> Vec<T>
    where
        T: Clone,
    {
        self.iter().cloned().collect()
    }

    /// Takes every item out, leaving the list empty.
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        let len = std::mem::take(&mut self.len);
        self.items.iter_mut().take(len).filter_map(Option::take)
    }
}

/// Tests index freely; command paths use [`Bounded::get`] (an index past the end panics).
#[cfg(test)]
impl<T, const N: usize> std::ops::Index<usize> for Bounded<T, N> {
    type Output = T;
    fn index(&self, i: usize) -> &T {
        self.get(i).expect("index within the list")
    }
}

impl<T, const N: usize> Default for Bounded<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: PartialEq, const N: usize> PartialEq for Bounded<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl<T: Eq, const N: usize> Eq for Bounded<T, N> {}

impl<'a, T, const N: usize> IntoIterator for &'a Bounded<T, N> {
    type Item = &'a T;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Option<T>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.filled().iter().flatten()
    }
}

impl<T, const N: usize> FromIterator<T> for Bounded<T, N> {
    /// The first `N` items (more are dropped).
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut list = Bounded::new();
        for item in iter.into_iter().take(N) {
            let _ = list.push(item);
        }
        list
    }
}

#[cfg(test)]
mod tests {
    use super::Bounded;

    #[test]
    fn keeps_order_and_refuses_past_capacity() {
        let mut list: Bounded<u32, 2> = Bounded::new();
        assert!(list.is_empty());
        assert_eq!(list.push(1), Ok(()));
        assert_eq!(list.push(2), Ok(()));
        assert_eq!(list.push(3), Err(3));
        assert_eq!(list.len(), 2);
        assert_eq!(list.iter().copied().collect::<Vec<_>>(), [1, 2]);
        assert_eq!((list.get(1), list.get(2)), (Some(&2), None));
        for item in list.iter_mut() {
            *item *= 10;
        }
        assert_eq!(list.drain().collect::<Vec<_>>(), [10, 20]);
        assert!(list.is_empty() && list.get(0).is_none());
        let collected: Bounded<u32, 2> = (5..9).collect();
        assert_eq!(collected.iter().copied().collect::<Vec<_>>(), [5, 6]);
    }
}
