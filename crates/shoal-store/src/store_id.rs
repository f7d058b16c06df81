//! Which store a handle or an item belongs to, as a plain identity: what lets
//! [`Store::pin`](crate::Store::pin) refuse another store's item without the item type
//! depending on the store's shared state.

/// The identity of one store's shared state: its address. Unique among live stores,
/// since the state lives in an `Arc` that every handle, writer and item (through the
/// lock it was read under) keeps alive.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct StoreId(*const ());

impl StoreId {
    /// The identity of `state`.
    pub(crate) fn of<T>(state: &T) -> StoreId {
        StoreId(std::ptr::from_ref(state).cast())
    }
}
